"""Build the records sent to retry tiers and the DLT: original bytes, key and headers
unchanged, failure metadata added as headers (one fresh set per trip)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.failure_detail import ExceptionText
from app.records import RawRecord
from dlq import headers as h
from dlq.policy import DeadReason, Route
from dlq.trip import Trip, iso


@dataclass(frozen=True, slots=True)
class OutRecord:
    """A record to publish."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Failure:
    """Why and when an event failed for a consumer (``None`` consumer: poison); ``error``
    is what ``FAILURE_DETAIL`` lets through of the exception."""

    consumer: str | None
    error: ExceptionText
    at: datetime
    event: Any | None = None


def original_headers(record: RawRecord) -> list[tuple[str, bytes]]:
    """The record's own headers, without any this framework added on an earlier trip."""
    return [(k, v) for k, v in record.headers if not h.is_ours(k)]


def _provenance(trip: Trip, app_id: str | None) -> list[tuple[str, str]]:
    """Where the event came from, and the deployment (``app_id``) the record is for."""
    pairs = [
        (h.DLT_ORIGINAL_TOPIC, trip.original_topic),
        (h.DLT_ORIGINAL_PARTITION, str(trip.original_partition)),
        (h.DLT_ORIGINAL_OFFSET, str(trip.original_offset)),
    ]
    if trip.original_timestamp_ms is not None:
        pairs.append((h.DLT_ORIGINAL_TIMESTAMP, str(trip.original_timestamp_ms)))
    if trip.replay_count:
        pairs.append((h.DLT_REPLAY_COUNT, str(trip.replay_count)))
    if app_id:
        pairs.append((h.DLT_APP_ID, app_id))
    return pairs


def _encode(pairs: list[tuple[str, str]]) -> list[tuple[str, bytes]]:
    return [(k, v.encode()) for k, v in pairs]


def retry_record(
    record: RawRecord, trip: Trip, failure: Failure, route: Route, app_id: str | None = None
) -> OutRecord:
    """The record for the next retry tier, to be run again by ``failure.consumer`` of the
    deployment ``app_id`` only."""
    assert route.due_at is not None and failure.consumer is not None
    first = trip.first_failure_at or failure.at
    ours = [
        (h.RETRY_CONSUMER_GROUP, failure.consumer),
        (h.RETRY_ATTEMPT, str(route.attempts)),
        (h.RETRY_FIRST_FAILURE_AT, iso(first)),
        (h.RETRY_DUE_AT, iso(route.due_at)),
        *_provenance(trip, app_id),
    ]
    return OutRecord(
        route.topic, record.key, record.value, (*original_headers(record), *_encode(ours))
    )


def dead_letter_record(
    record: RawRecord,
    trip: Trip,
    failure: Failure,
    reason: DeadReason,
    attempts: int,
    topic: str,
    app_id: str | None = None,
) -> OutRecord:
    """The DLT record of the deployment ``app_id``: original bytes plus the failure metadata
    (the exception's message and stack trace only where ``failure.error`` has them)."""
    first = trip.first_failure_at or failure.at
    ours = [
        *_provenance(trip, app_id),
        (h.DLT_REASON, reason.value),
        *_exception(failure.error),
        (h.DLT_ATTEMPTS, str(attempts)),
        (h.DLT_FIRST_FAILURE_AT, iso(first)),
        (h.DLT_LAST_FAILURE_AT, iso(failure.at)),
    ]
    if failure.consumer:
        ours.append((h.DLT_CONSUMER_GROUP, failure.consumer))
    event = failure.event
    if event is not None:  # an envelope, or what a failed one named of itself (poison)
        named = [
            (h.DLT_EVENT_ID, event.event_id),
            (h.DLT_EVENT_TYPE, event.event_type),
            (h.DLT_AGGREGATE_TYPE, event.aggregate_type),
            (h.DLT_AGGREGATE_ID, event.aggregate_id),
        ]
        ours += [(name, value) for name, value in named if value is not None]
        if event.aggregate_version is not None:
            ours.append((h.DLT_AGGREGATE_VERSION, str(event.aggregate_version)))
    return OutRecord(topic, record.key, record.value, (*original_headers(record), *_encode(ours)))


def _exception(error: ExceptionText) -> list[tuple[str, str]]:
    pairs = [(h.DLT_EXCEPTION_TYPE, error.type)]
    if error.message is not None:
        pairs.append((h.DLT_EXCEPTION_MESSAGE, error.message[: h.MESSAGE_LIMIT]))
    if error.stacktrace is not None:
        pairs.append((h.DLT_EXCEPTION_STACKTRACE, _stacktrace(error.stacktrace)))
    return pairs


def _stacktrace(text: str) -> str:
    limit = h.STACKTRACE_LIMIT
    return text if len(text) <= limit else "...\n" + text[-limit:]


def replay_record(
    dead: RawRecord, skip: bool = False, consumer: str | None = None, app_id: str | None = None
) -> OutRecord:
    """What the DLQ command publishes to bring a dead record back (or to skip it).

    It goes to the record's original topic, so it lands on its aggregate's
    partition, and names the consumer that failed it (or ``consumer``, whom an
    operator skips poison for): only that consumer runs it (the others applied
    it long ago). Attempts start afresh; the replay count goes up by one. A skip
    carries ``retry-action: skip``: the consumer takes the event's version
    without running its handlers (its payload need not validate). ``app_id``: the
    deployment whose consumer it is for (the command's ``APP_ID``); another deployment
    whose consumer has the same name leaves it alone.
    """
    trip = Trip.of(dead)
    named = dead.header(h.DLT_CONSUMER_GROUP)
    consumer = consumer or (named.decode() if named else None)
    replayed = Trip.start(
        trip.original_topic,
        trip.original_partition,
        trip.original_offset,
        trip.original_timestamp_ms,
        replay_count=trip.replay_count + 1,
    )
    ours = _provenance(replayed, app_id)
    if consumer:
        ours.append((h.RETRY_CONSUMER_GROUP, consumer))
    if skip:
        ours.append((h.RETRY_ACTION, "skip"))
    return OutRecord(
        trip.original_topic, dead.key, dead.value, (*original_headers(dead), *_encode(ours))
    )
