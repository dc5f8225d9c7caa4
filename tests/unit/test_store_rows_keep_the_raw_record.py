"""The rows the store writes for a parked or failed event keep the record exactly as it arrived.

Contract: ``parked_row`` and ``failure_row`` copy the record's topic,
partition, offset, key, value and headers (headers as JSON, values base64)
next to the event's identity, so the event can be decoded and applied, or
replayed to the DLT, byte for byte later. A failure of a record that never
became an event has NULL identity columns. The exception is stored as its
qualified type name and its message (cut at 4,000 characters). Timestamps
are timezone-aware UTC. ``BatchChanges.empty()`` never shares state.
"""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import orjson

from app.errors import UndecodableError
from app.pipeline.decode import Decoded, decode
from app.pipeline.store import BatchChanges, failure_row, now, parked_row
from app.records import RawRecord, headers_from_json

HEADERS = (("traceparent", b"00-abc-01"), ("bin", b"\x00\xff"), ("traceparent", b"second"))


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

    row = failure_row("points", item.record, item.event, "retryable", KeyError("sku-1"))

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
    assert row["exception_type"] == "builtins.KeyError"
    assert row["exception_message"] == "'sku-1'"
    assert (row["record_key"], row["record_value"]) == (b"o-9", item.record.value)
    assert headers_from_json(row["record_headers"]) == HEADERS
    assert row["failed_at"].tzinfo is not None


def test_a_failure_row_of_a_record_that_never_became_an_event() -> None:
    raw = record(None)

    row = failure_row("", raw, None, "undecodable", UndecodableError("value is not JSON"))

    assert row["consumer_group"] == ""
    assert [row[c] for c in ("event_id", "event_type", "aggregate_type", "aggregate_id")] == [
        None
    ] * 4
    assert row["aggregate_version"] is None
    assert row["record_value"] is None
    assert row["exception_type"] == "app.errors.UndecodableError"


def test_a_huge_exception_message_is_cut() -> None:
    row = failure_row("points", record(b"{}"), None, "retryable", ValueError("x" * 10_000))

    assert row["exception_message"] == "x" * 4000


def test_now_is_timezone_aware_utc() -> None:
    assert now().tzinfo is UTC


def test_empty_batch_changes_share_nothing() -> None:
    first, second = BatchChanges.empty(), BatchChanges.empty()

    first.consumed.append({"event_id": "e1"})
    first.versions[("Order", "o-1")] = 1
    first.unparked.add("e2")

    assert second == BatchChanges([], {}, [], set(), [])
