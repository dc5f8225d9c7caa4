"""Header names added to retry and dead-letter records: a contract for alerting and tooling.

The original record's key, value and headers travel unchanged; these are added
on top, and replaced (never appended) on every trip, so a record carries one
set of them however often it went round.
"""

from __future__ import annotations

RETRY_PREFIX = "retry-"
DLT_PREFIX = "dlt-"

# Retry records.
RETRY_CONSUMER_GROUP = "retry-consumer-group"
RETRY_ATTEMPT = "retry-attempt"
RETRY_FIRST_FAILURE_AT = "retry-first-failure-at"
RETRY_DUE_AT = "retry-due-at"
RETRY_ACTION = "retry-action"  # "skip": an operator gave up on the event for that consumer

# Dead-letter records (and the provenance that retry records carry to get there).
DLT_ORIGINAL_TOPIC = "dlt-original-topic"
DLT_ORIGINAL_PARTITION = "dlt-original-partition"
DLT_ORIGINAL_OFFSET = "dlt-original-offset"
DLT_ORIGINAL_TIMESTAMP = "dlt-original-timestamp"
DLT_CONSUMER_GROUP = "dlt-consumer-group"
DLT_REASON = "dlt-reason"
DLT_EXCEPTION_TYPE = "dlt-exception-type"
DLT_EXCEPTION_MESSAGE = "dlt-exception-message"
DLT_EXCEPTION_STACKTRACE = "dlt-exception-stacktrace"
DLT_ATTEMPTS = "dlt-attempts"
DLT_FIRST_FAILURE_AT = "dlt-first-failure-at"
DLT_LAST_FAILURE_AT = "dlt-last-failure-at"
DLT_EVENT_ID = "dlt-event-id"
DLT_EVENT_TYPE = "dlt-event-type"
DLT_AGGREGATE_TYPE = "dlt-aggregate-type"
DLT_AGGREGATE_ID = "dlt-aggregate-id"
DLT_AGGREGATE_VERSION = "dlt-aggregate-version"
DLT_REPLAY_COUNT = "dlt-replay-count"
# The deployment (``APP_ID``) a retry, replay or skip record is for, and that wrote a DLT
# record: services reading one topic share its retry tiers and DLT, and consumers of
# theirs may share a name; each takes and acts on its own records only.
DLT_APP_ID = "dlt-app-id"

STACKTRACE_LIMIT = 8_000
MESSAGE_LIMIT = 2_000


OURS = frozenset(
    value
    for name, value in dict(globals()).items()
    if name.startswith(("RETRY_", "DLT_")) and not name.endswith("_PREFIX")
)
"""Every header name above: exactly these are replaced on each trip."""


def is_ours(name: str) -> bool:
    """True for a header this framework adds (stripped before adding a fresh set).

    Only the exact names count: a producer's own ``retry-after`` travels unchanged.
    """
    return name in OURS
