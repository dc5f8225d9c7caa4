"""An outbox row is sent exactly as written: the worker's records byte for byte, a
producer's payload verbatim.

Contract (``app.outbox.records``, ``app.outbox.message``): a retry or DLT record stored
as a row comes back with the same key, value and headers, bytes that are no UTF-8 and
repeated header names included, and its row files it under ``effectively-once`` and the
failed event's id; a business row is sent with value = the payload's bytes, key =
``event_key`` or else the aggregate id, headers = the ``headers`` object plus ``id``,
``eventType`` and ``aggregateType`` from the row's columns;
a payload that is not JSON, or headers that are not an object of text, is refused
with a reason (the row's attempt fails), not sent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.outbox.message import BadRow, message_of
from app.outbox.records import DEAD_LETTER, RETRY, record_row
from dlq.records import OutRecord

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    "record",
    [
        OutRecord(
            "orders.retry.1s",
            b"\xff\x00key",
            b"\x80\x81 not utf-8 \x00",
            (("trace", b"\xfe\xff"), ("trace", b"again"), ("retry-attempt", b"1")),
        ),
        OutRecord("orders.DLT", None, b"{}", ()),
        OutRecord("orders.DLT", b"k", None, (("empty", b""),)),
    ],
    ids=["binary", "no-key", "no-value"],
)
def test_a_record_row_gives_back_the_record_byte_for_byte(record: OutRecord) -> None:
    row = record_row(record, RETRY, "evt-1", {"consumer": "points"}, NOW)
    sent = message_of(row)
    assert (sent.topic, sent.key, sent.value, sent.headers) == (
        record.topic,
        record.key,
        record.value,
        record.headers,
    )
    assert (row["aggregate_type"], row["aggregate_id"], row["event_type"]) == (
        "effectively-once",
        "evt-1",
        "retry",
    )
    assert row["event_id"] != "evt-1"


def test_a_record_of_an_event_without_a_readable_id_is_filed_under_its_own() -> None:
    row = record_row(OutRecord("orders.DLT", None, b"x", ()), DEAD_LETTER, None, {}, NOW)
    assert row["aggregate_id"] == row["event_id"]
    long = record_row(OutRecord("orders.DLT", None, b"x", ()), DEAD_LETTER, "e" * 65, {}, NOW)
    assert long["aggregate_id"] == long["event_id"]


def business(**changes: Any) -> dict[str, Any]:
    row = {
        "event_id": "evt-1",
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": "order-1",
        "event_key": None,
        "topic": "orders",
        "payload": '{"eventId": "evt-1", "amount": 12.50}',
        "headers": None,
        "record_key": None,
        "record_value": None,
        "record_headers": None,
    }
    return row | changes


def test_a_business_row_is_sent_as_written() -> None:
    sent = message_of(business())
    assert sent.value == b'{"eventId": "evt-1", "amount": 12.50}'
    assert sent.key == b"order-1"
    assert sent.headers == (
        ("id", b"evt-1"),
        ("eventType", b"OrderPaid"),
        ("aggregateType", b"Order"),
    )
    keyed = message_of(
        business(
            event_key="customer-7",
            headers='{"traceparent": "00-1", "id": "x", "eventType": "y", "aggregateType": "z"}',
        )
    )
    assert keyed.key == b"customer-7"
    # The row's columns, whatever a hand-written row's headers say.
    assert keyed.headers == (
        ("traceparent", b"00-1"),
        ("id", b"evt-1"),
        ("eventType", b"OrderPaid"),
        ("aggregateType", b"Order"),
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"payload": "{not json"}, "payload is not JSON"),
        ({"headers": "[1, 2]"}, "headers must be a JSON object"),
        ({"headers": '{"n": 1}'}, "headers must be a JSON object"),
        ({"headers": "{oops"}, "headers is not JSON"),
        # Written by hand: the broker refuses the name, and the relay waited for its
        # metadata as for an outage, every row behind it held (no attempt counted).
        ({"topic": ".."}, "topic '..' is no Kafka topic name"),
        ({"topic": "."}, "topic '.' is no Kafka topic name"),
        ({"topic": "bad topic!"}, "topic 'bad topic!' is no Kafka topic name"),
    ],
)
def test_a_row_that_cannot_be_a_record_is_refused_with_a_reason(
    changes: dict[str, Any], reason: str
) -> None:
    with pytest.raises(BadRow, match=reason):
        message_of(business(**changes))
