"""Dead-letter records built the way the pipeline builds them (``dlq.records``), for the
DLQ command's unit tests: no broker, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from app.failure_detail import FailureDetail, FailureDetailPolicy
from app.records import RawRecord
from dlq.dead import DeadLetter, FailureState
from dlq.policy import DeadReason
from dlq.records import Failure, dead_letter_record
from dlq.selection import Entry
from dlq.topics import dlt_topic
from dlq.trip import Trip

BASE = "orders"
DLT = dlt_topic(BASE)
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
ORIGINAL_HEADERS = (("traceparent", b"00-abc-01"),)


def letter(
    dlt_offset: int,
    *,
    dlt_partition: int = 0,
    consumer: str | None = "points-service",
    original: tuple[int, int] = (0, 7),
    event_id: str = "e-1",
    aggregate: str = "order-1",
    version: int | None = 2,
    reason: DeadReason = DeadReason.RETRIES_EXHAUSTED,
    minutes: int = 0,
    attempts: int = 3,
    replay_count: int = 0,
    value: bytes = b'{"eventId": "e-1"}',
    readable: bool = False,
    app_id: str | None = None,
) -> DeadLetter:
    """A DLT record at ``dlt_partition:dlt_offset``; ``consumer=None`` makes it poison, and
    ``readable`` poison whose envelope could be read (it names the event and aggregate).

    It failed ``minutes`` after ``T0``, at ``original`` (partition, offset) of ``BASE``.
    """
    partition, offset = original
    source = RawRecord(BASE, partition, offset, aggregate.encode(), value, ORIGINAL_HEADERS, 1_000)
    trip = Trip.of(source)._replace(replay_count=replay_count)
    event = SimpleNamespace(
        event_id=event_id,
        event_type="OrderPaid",
        aggregate_type="Order",
        aggregate_id=aggregate,
        aggregate_version=version,
    )
    at = T0 + timedelta(minutes=minutes)
    error = FailureDetailPolicy(FailureDetail.FULL).describe(RuntimeError("boom"))
    failure = Failure(consumer, error, at, event if consumer or readable else None)
    out = dead_letter_record(source, trip, failure, reason, attempts, DLT, app_id)
    return DeadLetter.of(
        RawRecord(DLT, dlt_partition, dlt_offset, out.key, out.value, out.headers, 2_000)
    )


def entry(dead: DeadLetter, status: str = "dead", by: str | None = None) -> Entry:
    """``dead`` joined with a ``failed_event`` row in ``status``."""
    return Entry(dead, FailureState(status, by, None))
