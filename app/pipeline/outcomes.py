"""What happened to one event for one consumer: values, not exceptions.

Metrics, logs and tests assert on these.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class Kind(StrEnum):
    """The outcome names, as they appear in metrics and logs."""

    APPLIED = "applied"
    DUPLICATE = "duplicate"
    STALE = "stale"
    PARKED = "parked"
    RETRIED = "retried"
    DEAD_LETTERED = "dead-lettered"
    SKIPPED = "skipped"
    POISON = "poison"


class Outcome(NamedTuple):
    """``kind`` happened to ``event_id`` for ``consumer`` (``""`` for poison: no consumer's).

    ``detail`` is a bounded value metrics may use as a label: for ``retried`` the retry
    topic, for ``dead-lettered`` and ``poison`` the ``dlt-reason`` (or
    ``DEAD_LETTERED_BEFORE``). ``error`` is the failure's own text, for logs only.
    ``topic``, ``partition`` and ``offset``: where the record was read, set for poison
    (which may have no eventId to name it by), for logs only.

    A named tuple: immutable, and built per event and consumer, where a frozen
    dataclass costs several times as much.
    """

    kind: Kind
    consumer: str
    event_id: str | None
    event_type: str | None = None
    detail: str = ""
    error: str = ""
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


REPLAYED = "replayed"
"""The ``detail`` of an ``Applied`` event that a replay brought back from the DLT."""

DEAD_LETTERED_BEFORE = "dead-lettered-before"
"""The ``detail`` of a ``poison`` record read again: its DLT record was written before
(redelivered, or read by another consumer group), so none is written now."""


def Applied(consumer: str, event_id: str, event_type: str, detail: str = "") -> Outcome:
    """The event's effects and dedup record committed (or, without work, it took its version)."""
    return Outcome(Kind.APPLIED, consumer, event_id, event_type, detail)


def Duplicate(consumer: str, event_id: str, event_type: str) -> Outcome:
    """The consumer already applied (or parked) this eventId."""
    return Outcome(Kind.DUPLICATE, consumer, event_id, event_type)


def Stale(consumer: str, event_id: str, event_type: str, detail: str) -> Outcome:
    """The aggregate is already past this version."""
    return Outcome(Kind.STALE, consumer, event_id, event_type, detail)


def Parked(consumer: str, event_id: str, event_type: str, detail: str) -> Outcome:
    """The event waits in the database for an earlier version of its aggregate."""
    return Outcome(Kind.PARKED, consumer, event_id, event_type, detail)


def Skipped(consumer: str, event_id: str, event_type: str) -> Outcome:
    """An operator gave up on the event: its version was taken without running handlers."""
    return Outcome(Kind.SKIPPED, consumer, event_id, event_type)
