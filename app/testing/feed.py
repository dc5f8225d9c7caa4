"""What a test feeds the harness: envelopes as producers write them, records, a frozen clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from app.outbox.event import iso
from app.outbox.message import Message
from app.records import RawRecord

# The instant a ``FrozenClock`` shows until it is moved.
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def event(
    event_type: str,
    aggregate_id: str | int,
    version: int | None = None,
    data: Mapping[str, Any] | None = None,
    *,
    event_id: str | int | None = None,
    aggregate_type: str = "Order",
    event_version: int = 1,
    occurred_at: datetime | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An envelope as producers write it (camelCase JSON): ``event_id`` a fresh UUID unless
    given, ``version`` the ``aggregateVersion`` (left out when None), ``extra`` further
    fields (``traceId=...``). Ids may be numbers, as producers send them."""
    env: dict[str, Any] = {
        "eventId": event_id if event_id is not None else str(uuid.uuid4()),
        "eventType": event_type,
        "eventVersion": event_version,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
        "occurredAt": iso(occurred_at or NOW),
        "data": dict(data or {}),
    }
    if version is not None:
        env["aggregateVersion"] = version
    env.update(extra)
    return env


Headers = Mapping[str, bytes | str] | Iterable[tuple[str, bytes | str]]


def as_headers(headers: Headers) -> tuple[tuple[str, bytes], ...]:
    """``headers`` as a record carries them: ``(name, bytes)`` pairs, in order."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found = []
    for name, value in pairs:
        if isinstance(value, str):
            value = value.encode()
        if not isinstance(value, bytes):
            raise TypeError(f"header {name!r}: give bytes or text, not {type(value).__name__}")
        found.append((name, value))
    return tuple(found)


class Records:
    """Hands out records with increasing offsets per partition, as a broker would; on
    ``partition`` unless a record names its own."""

    def __init__(self, topic: str, partition: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self._next: dict[tuple[str, int], int] = {}

    @property
    def next_offset(self) -> int:
        """The offset the next record on the topic's default partition gets."""
        return self._next.get((self.topic, self.partition), 0)

    def raw(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers = (),
        topic: str | None = None,
        partition: int | None = None,
    ) -> RawRecord:
        """A record carrying exactly ``value`` (on ``topic``, default the harness's, and
        ``partition``, default this feed's); ``headers`` as a mapping or ``(name, value)``
        pairs, each value bytes or text (encoded UTF-8), as a producer's client takes them."""
        where = (topic or self.topic, self.partition if partition is None else partition)
        offset = self._next.get(where, 0)
        self._next[where] = offset + 1
        return RawRecord(where[0], where[1], offset, key, value, as_headers(headers))

    def of(self, envelope: Mapping[str, Any] | bytes | RawRecord) -> RawRecord:
        """The record for an envelope (key: its ``aggregateId``), raw bytes, or a record
        (delivered again on its topic and partition, at the next offset there)."""
        if isinstance(envelope, RawRecord):
            return self.raw(
                envelope.value, envelope.key, envelope.headers, envelope.topic, envelope.partition
            )
        if isinstance(envelope, bytes):
            return self.raw(envelope)
        aggregate = envelope.get("aggregateId")
        key = None if aggregate is None else str(aggregate).encode()
        return self.raw(orjson.dumps(envelope), key)

    def delivered(self, message: Message) -> RawRecord:
        """A record the outbox holds, as the broker hands it out: on its own topic."""
        return self.raw(message.value, message.key, message.headers, message.topic)


class FrozenClock:
    """A clock that shows ``now`` until ``advance`` moves it (the failure router's)."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds``."""
        self.now += timedelta(seconds=seconds)
