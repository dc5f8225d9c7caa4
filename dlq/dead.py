"""A dead-letter record as an operator sees it: its headers read into named fields.

Reading never fails: a record someone else put on the DLT, without our
headers, comes out with those fields empty rather than stopping a listing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from app.records import RawRecord
from dlq import headers as h

FailureKey = tuple[str, str, int, int]
"""``failed_event``'s primary key: consumer group ('' for poison), original topic, partition,
offset."""


class FailureStatus(StrEnum):
    """``failed_event.status``, plus ``unknown`` for a DLT record the database has no row for
    and ``unpublished`` for a failure whose retry or DLT record the relay gave up on."""

    RETRYING = "retrying"
    DEAD = "dead"
    REPLAYED = "replayed"
    SKIP_REQUESTED = "skip-requested"
    RESOLVED = "resolved"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    UNPUBLISHED = "unpublished"


SETTLED = frozenset({FailureStatus.RESOLVED, FailureStatus.SKIPPED})
"""The event took effect, or its consumer moved on: replay and skip leave it alone."""


@dataclass(frozen=True, slots=True)
class FailureState:
    """What the database says about a dead record: its status and the operator's decision."""

    status: str
    decided_by: str | None = None
    decision_note: str | None = None


NO_ROW = FailureState(FailureStatus.UNKNOWN)

AWAITING = frozenset({FailureStatus.DEAD, FailureStatus.RETRYING, FailureStatus.UNKNOWN})
"""The statuses under which an unpublished record shows as ``unpublished``: nobody decided
on its failure yet."""

UNPUBLISHED_PARTITION = -1
"""The partition of an unpublished record: it is on none; its offset is its outbox row's id."""


def position_text(partition: int, offset: int) -> str:
    """A position as the operator writes it: ``3:17`` in the DLT, or ``outbox:12`` for a
    record the relay gave up on (``UNPUBLISHED_PARTITION``, its outbox row's id)."""
    if partition == UNPUBLISHED_PARTITION:
        return f"outbox:{offset}"
    return f"{partition}:{offset}"


def event_text(aggregate_type: str | None, aggregate_id: str, version: int | None) -> str:
    """An event as the operator names it: ``type:id@version``, as ``release --aggregate``
    takes the aggregate (``type:id`` if unversioned, ``id`` without a type)."""
    named = f"{aggregate_type}:{aggregate_id}" if aggregate_type else aggregate_id
    return named if version is None else f"{named}@{version}"


@dataclass(frozen=True, slots=True)
class Unpublished:
    """Where a record that never reached its topic waits: its ``DEAD`` outbox row."""

    outbox_id: int
    topic: str
    kind: str
    attempts: int
    last_error: str
    since: datetime | None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record of a dead-letter topic (``record``) and what its headers say."""

    record: RawRecord
    consumer: str | None
    original_topic: str
    original_partition: int | None
    original_offset: int | None
    reason: str
    exception_type: str
    exception_message: str
    attempts: int | None
    first_failure_at: datetime | None
    last_failure_at: datetime | None
    event_id: str | None
    event_type: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    aggregate_version: int | None
    replay_count: int
    unpublished: Unpublished | None = None
    app_id: str | None = None  # the deployment that wrote it (None: written before it said)

    @classmethod
    def of(cls, record: RawRecord) -> DeadLetter:
        """Read ``record``'s dead-letter headers."""

        def text(name: str) -> str:
            value = record.header(name)
            return value.decode("utf-8", "replace") if value else ""

        return cls(
            record=record,
            consumer=text(h.DLT_CONSUMER_GROUP) or None,
            original_topic=text(h.DLT_ORIGINAL_TOPIC),
            original_partition=_int(text(h.DLT_ORIGINAL_PARTITION)),
            original_offset=_int(text(h.DLT_ORIGINAL_OFFSET)),
            reason=text(h.DLT_REASON),
            exception_type=text(h.DLT_EXCEPTION_TYPE),
            exception_message=text(h.DLT_EXCEPTION_MESSAGE),
            attempts=_int(text(h.DLT_ATTEMPTS)),
            first_failure_at=parse_time(text(h.DLT_FIRST_FAILURE_AT)),
            last_failure_at=parse_time(text(h.DLT_LAST_FAILURE_AT)),
            event_id=text(h.DLT_EVENT_ID) or None,
            event_type=text(h.DLT_EVENT_TYPE) or None,
            aggregate_type=text(h.DLT_AGGREGATE_TYPE) or None,
            aggregate_id=text(h.DLT_AGGREGATE_ID) or None,
            aggregate_version=_int(text(h.DLT_AGGREGATE_VERSION)),
            replay_count=_int(text(h.DLT_REPLAY_COUNT)) or 0,
            app_id=text(h.DLT_APP_ID) or None,
        )

    @property
    def position(self) -> str:
        """``partition:offset`` in the DLT: how ``show`` and ``replay`` name a record;
        ``outbox:<id>`` for one that never reached it."""
        return position_text(self.record.partition, self.record.offset)

    @property
    def is_poison(self) -> bool:
        """Dead for every consumer because it never became an event (no consumer header)."""
        return self.consumer is None

    @property
    def has_envelope(self) -> bool:
        """The envelope could be read (eventId, aggregate): a consumer can take its version."""
        return bool(self.event_id and self.aggregate_type and self.aggregate_id)

    @property
    def holds_a_version(self) -> bool:
        """Its headers name its aggregate and version: a consumer's later versions of that
        aggregate wait for it, whether or not its envelope could be read."""
        return (
            bool(self.aggregate_type and self.aggregate_id) and self.aggregate_version is not None
        )

    @property
    def skipped_by_version(self) -> bool:
        """Poison whose envelope cannot be read but that holds a version back: a skip of it
        is a skip record of that version (``dlq.skip_record``), not its own bytes."""
        return self.is_poison and not self.has_envelope and self.holds_a_version

    @property
    def failure_key(self) -> FailureKey | None:
        """The ``failed_event`` row this record belongs to (None: provenance headers missing)."""
        topic, partition, offset = (
            self.original_topic,
            self.original_partition,
            self.original_offset,
        )
        if not topic or partition is None or offset is None:
            return None
        return (self.consumer or "", topic, partition, offset)


def parse_time(text: str) -> datetime | None:
    """An ISO-8601 time as the headers write it; naive means UTC; None if empty or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
