"""The outbox writer builds the envelope consumers read, and refuses what no row can hold.

Contract (``app.outbox.event``): the envelope is camelCase with ``eventId`` (a UUIDv7
unless given), ``occurredAt`` in UTC, ``eventVersion``, ``aggregateVersion`` only when
given, the optional tracing fields only when set, and ``data`` from a mapping or a
pydantic model, decimals as their exact text. An aggregate id, event id or key given
as an integer (a table's numeric key) is kept as its decimal text, as consumers read
ids (a boolean is no id). A field too long for its column, an
empty one, a version below 1, headers that are not text, data that is not JSON, a
topic name Kafka cannot hold (``.`` and ``..`` too), or the framework's own aggregate
type raise ``InvalidOutboxEvent`` (a ``ValueError``) naming every problem, before anything
is written. So does what a row could hold but no consumer would read (the envelope is
checked by the consumers' own model, on its JSON): a control character in an id or type,
a version past 32 bits or a boolean one, an eventType longer than the consumers' 100
characters, data that is no object, a NaN or an infinity (which JSON writes as ``null``);
and the headers the framework sets (``id``, ``retry-*``, ``dlt-*``). Each of these was
written and published, and its consumers dead-lettered it as poison.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import orjson
import pytest
from pydantic import BaseModel

from app.errors import InvalidOutboxEvent
from app.outbox import NewEvent

NOW = datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=UTC)


class Paid(BaseModel):
    order_id: str
    amount: Decimal


def test_the_row_carries_the_envelope_consumers_read() -> None:
    event = NewEvent(
        "orders", "OrderPaid", "Order", "o-1", {"amount": Decimal("10.10")},
        aggregate_version=2, trace_id="t-1",
    )  # fmt: skip
    row = event.row(NOW)
    envelope = orjson.loads(row["payload"])
    assert envelope == {
        "eventId": row["event_id"],
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-1",
        "aggregateVersion": 2,
        "occurredAt": "2026-12-03T10:00:00.123Z",
        "traceId": "t-1",
        "data": {"amount": "10.10"},
    }
    assert uuid.UUID(row["event_id"]).version == 7
    assert (row["status"], row["retry_count"], row["created_at"]) == ("PENDING", 0, NOW)


def test_a_given_event_id_and_a_model_as_data_are_kept() -> None:
    event = NewEvent(
        "orders", "OrderPaid", "Order", "o-1", Paid(order_id="o-1", amount=Decimal("5")),
        event_id="evt-7", headers={"traceparent": "00-1"},
    )  # fmt: skip
    row = event.row(NOW)
    assert row["event_id"] == "evt-7"
    assert orjson.loads(row["payload"])["data"] == {"order_id": "o-1", "amount": "5"}
    assert "aggregateVersion" not in orjson.loads(row["payload"])
    assert orjson.loads(row["headers"]) == {"traceparent": "00-1"}


def test_every_problem_is_named_at_once() -> None:
    event = NewEvent(
        "", "OrderPaid", "effectively-once", "o" * 65, {}, aggregate_version=0,
        headers={"n": 1},  # type: ignore[dict-item]
    )  # fmt: skip
    with pytest.raises(InvalidOutboxEvent) as raised:
        event.row(NOW)
    message = str(raised.value)
    for part in ("topic must be text of 1 to 128", "aggregate_id must be text of 1 to 64",
                 "framework's own",
                 "aggregate_version counts from 1", "headers must map"):  # fmt: skip
        assert part in message
    assert isinstance(raised.value, ValueError)


def test_integer_ids_are_kept_as_their_text() -> None:
    event = NewEvent("orders", "OrderPaid", "Order", 1001, {}, event_id=42, key=7)

    row = event.row(NOW)

    assert (row["aggregate_id"], row["event_id"], row["event_key"]) == ("1001", "42", "7")
    envelope = orjson.loads(row["payload"])
    assert (envelope["aggregateId"], envelope["eventId"]) == ("1001", "42")


@pytest.mark.parametrize("topic", ["shop totals", "shop/totals", "ünïcode", ".", ".."])
def test_a_topic_kafka_cannot_hold_is_refused(topic: str) -> None:
    with pytest.raises(InvalidOutboxEvent, match="is no Kafka topic name"):
        NewEvent(topic, "OrderPaid", "Order", "o-1", {}).row(NOW)


def test_a_boolean_is_no_id() -> None:
    with pytest.raises(InvalidOutboxEvent, match="aggregate_id must be text"):
        NewEvent("orders", "OrderPaid", "Order", True, {}).row(NOW)


def test_data_that_is_not_json_is_refused() -> None:
    with pytest.raises(InvalidOutboxEvent, match="not JSON-serialisable"):
        NewEvent("orders", "X", "Order", "o-1", {"when": object()}).row(NOW)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"aggregate_id": "ord\n1"}, "aggregateId: String should match pattern"),
        ({"aggregate_id": "ord\x001"}, "aggregateId: String should match pattern"),
        ({"event_type": "Order\x00Paid"}, "eventType: String should match pattern"),
        ({"event_id": "e\x7f1"}, "eventId: String should match pattern"),
        ({"event_type": "X" * 110}, "eventType: String should have at most 100 characters"),
        ({"data": [1, 2]}, "data: Input should be an object"),
        ({"data": "hello"}, "data: Input should be an object"),
    ],
)
def test_what_no_consumer_would_read_is_refused(changes: dict[str, object], said: str) -> None:
    fields: dict[str, object] = {
        "topic": "orders", "event_type": "OrderPaid", "aggregate_type": "Order",
        "aggregate_id": "o-1", "data": {},
    } | changes  # fmt: skip

    with pytest.raises(InvalidOutboxEvent) as raised:
        NewEvent(**fields).row(NOW)  # type: ignore[arg-type]

    assert "the envelope would be poison to its consumers" in str(raised.value)
    assert said in str(raised.value)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"aggregate_version": 2**31}, "aggregate_version must be an integer of at most"),
        ({"aggregate_version": True}, "aggregate_version must be an integer of at most"),
        ({"event_version": 2**31}, "event_version must be an integer of at most"),
        ({"data": {"x": float("nan")}}, "data holds NaN or an infinity"),
        ({"data": {"x": [1.0, float("inf")]}}, "data holds NaN or an infinity"),
        ({"headers": {"id": "spoofed"}}, "headers 'id' are the framework's own"),
        (
            {"headers": {"eventType": "x", "aggregateType": "y"}},
            "headers 'aggregateType', 'eventType' are the framework's own",
        ),
        ({"headers": {"retry-attempt": "soon"}}, "headers 'retry-attempt' are the framework's"),
    ],
)
def test_versions_numbers_and_headers_consumers_refuse(
    changes: dict[str, object], said: str
) -> None:
    fields: dict[str, object] = {
        "topic": "orders", "event_type": "OrderPaid", "aggregate_type": "Order",
        "aggregate_id": "o-1", "data": {},
    } | changes  # fmt: skip

    with pytest.raises(InvalidOutboxEvent, match=said):
        NewEvent(**fields).row(NOW)  # type: ignore[arg-type]


def test_a_header_of_ones_own_and_a_retry_after_pass() -> None:
    row = NewEvent(
        "orders", "OrderPaid", "Order", "o-1", {}, headers={"retry-after": "5", "x": "1"}
    ).row(NOW)

    assert orjson.loads(row["headers"]) == {"retry-after": "5", "x": "1"}
