"""Route-failure stage: decide where a failed or poison record goes next, and what the
database remembers about it. Pure apart from the injected clock. The record to publish
becomes an outbox row (``Routed.outbox_row``), written in the transaction that records
the failure: no path takes an event out of the database without its replacement."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.db.tables import failed_event
from app.failure_detail import ExceptionText, FailureDetailPolicy
from app.outbox.records import DEAD_LETTER, RETRY, record_row
from app.pipeline.apply import EventFailed
from app.pipeline.decode import Decoded, Poison
from app.pipeline.outcomes import Kind
from app.records import RawRecord, headers_to_json
from dlq.dead import FailureStatus
from dlq.policy import DeadReason, RetryPolicy, route
from dlq.records import Failure, OutRecord, dead_letter_record, original_headers, retry_record
from dlq.topics import dlt_topic
from dlq.trip import Trip

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Routed:
    """A failure's next stop: the record to publish, its ``failed_event`` row and outcome;
    ``error`` is the failure for the log, saying what the record and row say."""

    out: OutRecord
    row: dict[str, Any]
    kind: Kind
    detail: str
    error: str

    def outbox_row(self, now: datetime) -> dict[str, Any]:
        """The ``outbox_event`` row that ships ``out``, byte for byte (``app.outbox.records``)."""
        row = self.row
        about = {
            "consumer": row["consumer_group"] or None,
            "original": f"{row['topic']}[{row['partition']}]@{row['offset']}",
            "reason": row["reason"],
            "attempts": row["attempts"],
        }
        kind = RETRY if self.kind is Kind.RETRIED else DEAD_LETTER
        return record_row(self.out, kind, row["event_id"], about, now)


@dataclass(frozen=True)
class FailureRouter:
    """Turns failures into retry-tier or DLT records (see ``dlq.policy.route``), telling of
    each exception what ``detail`` lets through (``FAILURE_DETAIL``)."""

    policy: RetryPolicy
    clock: Clock = field(default=utc_now)
    detail: FailureDetailPolicy = field(default_factory=FailureDetailPolicy)
    app_id: str | None = None  # the deployment its records are for (``dlt-app-id``)

    def handler_failure(self, item: Decoded, consumer: str, failed: EventFailed) -> Routed:
        """``item`` failed for ``consumer`` (a handler raised, or its record was refused): next
        tier, or the DLT."""
        now = self.clock()
        trip = item.trip
        attempts = trip.attempts + 1
        retryable = failed.reason != DeadReason.NON_RETRYABLE.value
        next_stop = route(self.policy, attempts, retryable, now)
        failure = Failure(consumer, self.detail.describe(failed.cause), now, item.event)
        error = f"{failed}: {failure.error.line}"
        if next_stop.dead is None:
            out = retry_record(item.record, trip, failure, next_stop, self.app_id)
            row = _row(consumer, item.record, trip, item.event, failed.reason, failure, attempts)
            retrying = row | {"status": FailureStatus.RETRYING}
            return Routed(out, retrying, Kind.RETRIED, out.topic, error)
        out = dead_letter_record(
            item.record, trip, failure, next_stop.dead, attempts, next_stop.topic, self.app_id
        )
        row = _row(consumer, item.record, trip, item.event, next_stop.dead.value, failure, attempts)
        dead = row | {"status": FailureStatus.DEAD}
        return Routed(out, dead, Kind.DEAD_LETTERED, next_stop.dead.value, error)

    def poison(self, poison: Poison, consumer: str | None = None) -> Routed:
        """Bytes that are no event go to the DLT once, for no consumer in particular; or
        for ``consumer`` when they were its parked event (they decoded when it parked them),
        or its retry or replay record (a later deploy's schema refuses them)."""
        now = self.clock()
        reason = DeadReason(poison.error.reason)
        failure = Failure(consumer, self.detail.describe(poison.error), now, poison.described)
        topic = dlt_topic(self.policy.base_topic)
        attempts = poison.trip.attempts + 1  # a retry record's attempts so far, and this one
        out = dead_letter_record(
            poison.record, poison.trip, failure, reason, attempts, topic, self.app_id
        )
        row = _row(
            consumer or "", poison.record, poison.trip, poison.described, reason.value, failure,
            attempts,
        )  # fmt: skip
        dead = row | {"status": FailureStatus.DEAD}
        return Routed(out, dead, Kind.POISON, reason.value, failure.error.line)


def _row(
    consumer: str,
    record: RawRecord,
    trip: Trip,
    event: Any | None,
    reason: str,
    failure: Failure,
    attempts: int,
) -> dict[str, Any]:
    error = failure.error
    return {
        "consumer_group": consumer,
        "topic": trip.original_topic,
        "partition": trip.original_partition,
        "offset": trip.original_offset,
        "event_id": getattr(event, "event_id", None),
        "event_type": getattr(event, "event_type", None),
        "aggregate_type": getattr(event, "aggregate_type", None),
        "aggregate_id": getattr(event, "aggregate_id", None),
        "aggregate_version": getattr(event, "aggregate_version", None),
        "reason": reason,
        "exception_type": _exception_type(error),
        "exception_message": (error.message or "")[:4000],
        "record_key": record.key,
        "record_value": record.value,
        "record_headers": headers_to_json(tuple(original_headers(record))),
        "attempts": attempts,
        "first_failed_at": trip.first_failure_at or failure.at,
        "last_failed_at": failure.at,
    }


EXCEPTION_TYPE_MAX: int = failed_event.c.exception_type.type.length  # type: ignore[attr-defined]


def _exception_type(error: ExceptionText) -> str:
    """``module.QualifiedName`` of the exception's class; if longer than its column, the
    start gives way (the class name is the end), so that the row is always written."""
    name = error.type
    if len(name) <= EXCEPTION_TYPE_MAX:
        return name
    return "..." + name[-(EXCEPTION_TYPE_MAX - 3) :]
