"""What a record's headers say about its trip so far (main topic, retry tier, replay)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from app.records import RawRecord
from dlq import headers as h


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
        # Positional: keywords cost a named tuple three times as much, for every record.
        return cls(None, 0, None, None, topic, partition, offset, timestamp_ms, replay_count, False)

    @classmethod
    def of(cls, record: RawRecord) -> Trip:
        """Read the trip from ``record``'s headers (absent headers: a fresh main-topic record)."""
        if not record.headers:
            return cls.start(record.topic, record.partition, record.offset, record.timestamp_ms)
        # One pass over the headers; the last value of a repeated name wins.
        found = dict(record.headers)

        def text(name: str) -> str:
            value = found.get(name)
            return value.decode("utf-8", "replace") if value else ""

        original_topic = text(h.DLT_ORIGINAL_TOPIC)
        timestamp = text(h.DLT_ORIGINAL_TIMESTAMP)
        return cls(
            consumer=text(h.RETRY_CONSUMER_GROUP) or None,
            attempts=int(text(h.RETRY_ATTEMPT) or 0),
            first_failure_at=_when(text(h.RETRY_FIRST_FAILURE_AT)),
            due_at=_when(text(h.RETRY_DUE_AT)),
            original_topic=original_topic or record.topic,
            original_partition=int(text(h.DLT_ORIGINAL_PARTITION) or record.partition)
            if original_topic
            else record.partition,
            original_offset=int(text(h.DLT_ORIGINAL_OFFSET) or record.offset)
            if original_topic
            else record.offset,
            original_timestamp_ms=int(timestamp) if timestamp else record.timestamp_ms,
            replay_count=int(text(h.DLT_REPLAY_COUNT) or 0),
            skip=text(h.RETRY_ACTION) == "skip",
        )


def _when(text: str) -> datetime | None:
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC, as every time header is written."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
