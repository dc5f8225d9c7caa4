"""What a record's headers say about its trip so far (main topic, retry tier, replay)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from app.db.tables import BIGINT_MAX, INTEGER_MAX, TOPIC
from app.errors import InvalidHeaderError
from app.records import RawRecord
from dlq import headers as h
from dlq.given_up import is_given_up
from dlq.topics import topic_name

_new = tuple.__new__
_OURS = h.OURS
_SKIP = "skip"
# The trip's headers the framework writes only with ``dlt-original-topic`` (retry records
# and replays carry where the event came from).
_WITH_PROVENANCE = (
    h.RETRY_CONSUMER_GROUP,
    h.RETRY_ACTION,
    h.RETRY_ATTEMPT,
    h.RETRY_FIRST_FAILURE_AT,
    h.RETRY_DUE_AT,
    h.DLT_ORIGINAL_PARTITION,
    h.DLT_ORIGINAL_OFFSET,
    h.DLT_ORIGINAL_TIMESTAMP,
    h.DLT_REPLAY_COUNT,
    h.DLT_APP_ID,
)
# What Kafka accepts as a topic name (``failed_event.topic`` holds 249 characters too).
_TOPIC_NAME = topic_name(TOPIC)


class Trip(NamedTuple):
    """Provenance and progress of a record through the retry path.

    For a record read from the main topic: no target consumer, no attempts yet,
    and the original coordinates are its own. (A named tuple: immutable, and built
    for every record, where a frozen dataclass costs twice as much.)
    """

    consumer: str | None
    attempts: int
    first_failure_at: datetime | None
    due_at: datetime | None
    original_topic: str
    original_partition: int
    original_offset: int
    original_timestamp_ms: int | None
    replay_count: int
    skip: bool
    app_id: str | None = None  # the deployment the record is for (None: a main-topic record)

    @classmethod
    def start(
        cls,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int | None,
        replay_count: int = 0,
    ) -> Trip:
        """A trip with nothing behind it yet, of the record first seen at ``topic[partition]
        @offset``: no target consumer, no attempt, no skip."""
        # The tuple built directly: the named tuple's own ``__new__`` (a Python function, with
        # keywords or not) costs about as much again, for every record.
        fields = (
            None, 0, None, None, topic, partition, offset, timestamp_ms, replay_count, False, None
        )  # fmt: skip
        return _new(cls, fields)

    @classmethod
    def of(cls, record: RawRecord) -> Trip:
        """Read the trip from ``record``'s headers (absent headers: a fresh main-topic record).

        Raises ``InvalidHeaderError`` when a header this framework writes holds what it
        never writes (a producer's ``retry-attempt: soon``): the record is poison.
        """
        for name, _ in record.headers:
            if name in _OURS:
                break
        else:  # none of the framework's headers (a producer's own, or none): a fresh record
            return cls.start(record.topic, record.partition, record.offset, record.timestamp_ms)
        # One pass over the headers; the last value of a repeated name wins.
        found = dict(record.headers)

        def text(name: str) -> str:
            value = found.get(name)
            return value.decode("utf-8", "replace") if value else ""

        def number(name: str, largest: int = INTEGER_MAX) -> int | None:
            value = text(name)
            if not value:
                return None
            try:
                parsed = int(value)
            except ValueError:
                parsed = -1
            if not 0 <= parsed <= largest:
                raise _malformed(name, value, f"an integer from 0 to {largest}")
            return parsed

        original_topic = text(h.DLT_ORIGINAL_TOPIC)
        if not original_topic and not _released_before(found, record):
            # Never written without it: a producer's header would aim the record at one
            # consumer (the others never see it), skip it, or count attempts never made.
            for name in _WITH_PROVENANCE:
                if found.get(name):
                    raise _without_provenance(name, text(name))
        action = text(h.RETRY_ACTION)
        if action not in ("", _SKIP):
            raise _malformed(h.RETRY_ACTION, action, repr(_SKIP))
        partition, offset = record.partition, record.offset
        if original_topic:
            if not _TOPIC_NAME.fullmatch(original_topic):
                raise _malformed(h.DLT_ORIGINAL_TOPIC, original_topic, "a Kafka topic name")
            partition = _default(number(h.DLT_ORIGINAL_PARTITION), partition)
            offset = _default(number(h.DLT_ORIGINAL_OFFSET, BIGINT_MAX), offset)
        timestamp = number(h.DLT_ORIGINAL_TIMESTAMP, BIGINT_MAX)
        return cls(
            consumer=text(h.RETRY_CONSUMER_GROUP) or None,
            # One below the largest: the next failure's count must still fit its column.
            attempts=_default(number(h.RETRY_ATTEMPT, INTEGER_MAX - 1), 0),
            first_failure_at=_when(h.RETRY_FIRST_FAILURE_AT, text(h.RETRY_FIRST_FAILURE_AT)),
            due_at=_when(h.RETRY_DUE_AT, text(h.RETRY_DUE_AT)),
            original_topic=original_topic or record.topic,
            original_partition=partition,
            original_offset=offset,
            original_timestamp_ms=record.timestamp_ms if timestamp is None else timestamp,
            replay_count=_default(number(h.DLT_REPLAY_COUNT, INTEGER_MAX - 1), 0),
            skip=action == _SKIP,
            app_id=text(h.DLT_APP_ID) or None,
        )

    @classmethod
    def fresh(cls, record: RawRecord) -> Trip:
        """The trip of ``record`` as if it had none behind it (for a record whose headers
        cannot be read: it is dead-lettered from where it is)."""
        return cls.start(record.topic, record.partition, record.offset, record.timestamp_ms)


# What ``dlq release`` wrote before its records said where they go: these two alone.
_RELEASED_BEFORE = frozenset({h.RETRY_CONSUMER_GROUP, h.RETRY_ACTION})


def _released_before(found: dict[str, bytes], record: RawRecord) -> bool:
    """Whether ``record`` is a skip record an earlier ``dlq release`` published (its two
    headers alone, and the envelope it derives for the consumer named): still unread at an
    upgrade, it is taken as released, not refused as a producer's header."""
    if {name for name in found if name in _OURS} != _RELEASED_BEFORE:
        return False
    consumer = found[h.RETRY_CONSUMER_GROUP].decode("utf-8", "replace")
    return found[h.RETRY_ACTION] == b"skip" and is_given_up(record.value, consumer)


def due_at(record: RawRecord) -> datetime | None:
    """``record``'s ``retry-due-at``; ``None`` when it has none or it cannot be read (such a
    record is poison: nothing to wait for)."""
    try:
        return Trip.of(record).due_at if record.headers else None
    except InvalidHeaderError:
        return None


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def _when(name: str, text: str) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _malformed(name, text, "an ISO-8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _without_provenance(name: str, value: str) -> InvalidHeaderError:
    return InvalidHeaderError(
        f"header {name} is {value[:80]!r} without {h.DLT_ORIGINAL_TOPIC}: the framework "
        "writes it only on its retry and replay records, with where the event came from; a "
        "producer must not set it"
    )


def _malformed(name: str, value: str, expected: str) -> InvalidHeaderError:
    return InvalidHeaderError(
        f"header {name} is {value[:80]!r}, not {expected}: the framework writes this header "
        "on retry and dead-letter records, a producer must not set it"
    )


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC, as every time header is written."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
