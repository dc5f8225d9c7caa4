"""The rows the store writes for a parked or failed event keep the record exactly as it arrived.

Contract: ``parked_row`` and the ``failed_event`` row the failure router
builds copy the record's topic, partition, offset, key, value and headers
(headers as JSON, values base64) next to the event's identity, so the event
can be decoded and applied, or replayed from the DLT, byte for byte later. A
failure row carries the attempt count, status and the router's clock as
``first_failed_at``/``last_failed_at``. A record back from a retry tier keeps
its row keyed by its ORIGINAL topic, partition and offset, stores only the
original headers (none this framework added) and keeps its first failure time.
A failure of a record that never became an event has NULL identity columns. The
exception is stored as its qualified type name (its start cut to fit the column,
so that the row is always written) and its message (cut at 4,000 characters).
Timestamps are timezone-aware UTC. ``BatchChanges.empty()`` never shares state.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from app.db.tables import failed_event
from app.pipeline.apply import HandlerFailed
from app.pipeline.decode import Decoded, Poison, decode
from app.pipeline.route import FailureRouter
from app.pipeline.store import BatchChanges, now, parked_row
from app.records import RawRecord, headers_from_json
from app.registry import HandlerSpec
from dlq.policy import RetryPolicy

HEADERS = (("traceparent", b"00-abc-01"), ("bin", b"\x00\xff"), ("traceparent", b"second"))
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
ROUTER = FailureRouter(RetryPolicy("order-event-topic", (1.0, 5.0)), clock=lambda: NOW)


def record(value: bytes | None) -> RawRecord:
    return RawRecord(
        topic="order-event-topic",
        partition=5,
        offset=1234567890123,
        key=b"o-9",
        value=value,
        headers=HEADERS,
        timestamp_ms=1_714_564_800_000,
    )


def failed(cause: BaseException) -> HandlerFailed:
    async def fn(event: Any, ctx: Any) -> None:  # pragma: no cover - never called
        pass

    return HandlerFailed(HandlerSpec("OrderCancelled", "points", fn), cause)


def failure_row(item: Decoded, cause: BaseException) -> dict[str, Any]:
    return ROUTER.handler_failure(item, "points", failed(cause)).row


def poison_row(raw: RawRecord) -> dict[str, Any]:
    poison = decode(raw)
    assert isinstance(poison, Poison)
    return ROUTER.poison(poison).row


def decoded(**overrides: Any) -> Decoded:
    env: dict[str, Any] = {
        "eventId": "e-7",
        "eventType": "OrderCancelled",
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-9",
        "aggregateVersion": 3,
        "occurredAt": "2024-05-01T12:00:00+02:00",
        "data": {"orderId": "o-9", "userId": "u-1"},
    }
    env.update(overrides)
    result = decode(record(orjson.dumps(env)))
    assert isinstance(result, Decoded)
    return result


def test_a_parked_row_keeps_the_record_and_the_event_identity() -> None:
    item = decoded()

    row = parked_row("inventory", item.event, item.record)

    assert {k: v for k, v in row.items() if k not in ("record_headers", "parked_at")} == {
        "consumer_group": "inventory",
        "event_id": "e-7",
        "aggregate_type": "Order",
        "aggregate_id": "o-9",
        "aggregate_version": 3,
        "event_type": "OrderCancelled",
        "topic": "order-event-topic",
        "partition": 5,
        "offset": 1234567890123,
        "record_key": b"o-9",
        "record_value": item.record.value,
    }
    assert headers_from_json(row["record_headers"]) == HEADERS
    assert row["parked_at"].utcoffset() == timedelta(0)


def test_the_parked_record_decodes_to_the_same_event() -> None:
    item = decoded(traceId="t-1")
    row = parked_row("inventory", item.event, item.record)

    stored = RawRecord(
        topic=row["topic"],
        partition=row["partition"],
        offset=row["offset"],
        key=row["record_key"],
        value=row["record_value"],
        headers=headers_from_json(row["record_headers"]),
    )
    again = decode(stored)

    assert isinstance(again, Decoded)
    assert again.event == item.event


def test_a_failure_row_of_an_event_keeps_record_identity_reason_and_exception() -> None:
    item = decoded()

    row = failure_row(item, KeyError("sku-1"))

    assert row["consumer_group"] == "points"
    assert (row["topic"], row["partition"], row["offset"]) == (
        "order-event-topic",
        5,
        1234567890123,
    )
    assert (row["event_id"], row["event_type"]) == ("e-7", "OrderCancelled")
    assert (row["aggregate_type"], row["aggregate_id"], row["aggregate_version"]) == (
        "Order",
        "o-9",
        3,
    )
    assert row["reason"] == "retryable"
    assert (row["status"], row["attempts"]) == ("retrying", 1)
    assert row["exception_type"] == "builtins.KeyError"
    assert row["exception_message"] == "'sku-1'"
    assert (row["record_key"], row["record_value"]) == (b"o-9", item.record.value)
    assert headers_from_json(row["record_headers"]) == HEADERS
    assert row["first_failed_at"] == row["last_failed_at"] == NOW


def test_a_failure_row_of_a_record_back_from_a_retry_tier_keeps_the_original() -> None:
    first = ROUTER.handler_failure(decoded(), "points", failed(KeyError("sku-1"))).out
    tier = RawRecord(first.topic, 0, 17, first.key, first.value, first.headers, 1_714_564_900_000)
    back = decode(tier)
    assert isinstance(back, Decoded)
    later = FailureRouter(ROUTER.policy, clock=lambda: NOW + timedelta(seconds=1))

    row = later.handler_failure(back, "points", failed(KeyError("sku-1"))).row

    assert (row["topic"], row["partition"], row["offset"]) == (
        "order-event-topic",
        5,
        1234567890123,
    )
    assert (row["status"], row["attempts"]) == ("retrying", 2)
    assert headers_from_json(row["record_headers"]) == HEADERS
    assert (row["first_failed_at"], row["last_failed_at"]) == (NOW, NOW + timedelta(seconds=1))


def test_a_failure_row_of_a_record_that_never_became_an_event() -> None:
    raw = record(None)

    row = poison_row(raw)

    assert row["consumer_group"] == ""
    # No event in it; its key names the aggregate, as it would an event's.
    assert [row[c] for c in ("event_id", "event_type", "aggregate_type", "aggregate_id")] == [
        None,
        None,
        "ORDER",
        "o-9",
    ]
    assert row["aggregate_version"] is None
    assert row["record_value"] is None
    assert (row["reason"], row["status"], row["attempts"]) == ("undecodable", "dead", 1)
    assert row["exception_type"] == "app.errors.UndecodableError"
    assert headers_from_json(row["record_headers"]) == HEADERS


def test_a_huge_exception_message_is_cut() -> None:
    row = failure_row(decoded(), ValueError("x" * 10_000))

    assert row["exception_message"] == "x" * 4000


def test_an_exception_type_longer_than_its_column_keeps_its_class_name() -> None:
    long_name = "Failure" + "Nested" * 40
    cause = type(long_name, (ValueError,), {})("x")

    exception_type = failure_row(decoded(), cause)["exception_type"]

    assert len(exception_type) == failed_event.c.exception_type.type.length == 200
    assert exception_type.startswith("...")
    assert exception_type.endswith("Nested" * 30)


def test_now_is_timezone_aware_utc() -> None:
    assert now().tzinfo is UTC


def test_empty_batch_changes_share_nothing() -> None:
    first, second = BatchChanges.empty(), BatchChanges.empty()

    first.consumed.append({"event_id": "e1"})
    first.versions[("Order", "o-1")] = 1
    first.held.add(("Order", "o-2"))
    first.unparked.add("e2")
    first.failed.append({"event_id": "e3"})
    first.resolved.append({"b_offset": 4})

    assert second == BatchChanges.empty()
