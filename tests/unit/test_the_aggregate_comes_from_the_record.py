"""The aggregate comes from the record when the value does not name it.

Contract: an ``aggregateId`` absent from the value (or null) is the record key,
decoded as UTF-8, unquoted when JSON-quoted, unwrapped when schema-wrapped (a
string or an integer inside); an absent ``aggregateType`` is the
``aggregateType`` header, else the configured default (``ORDER`` unless told
otherwise). What the value says wins over the record. An event whose aggregate
is nowhere, or whose key is no UTF-8 text, is poison (``invalid-schema``) with a
message that says so. The record is never changed.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest

from app.errors import InvalidSchemaError
from app.pipeline.decode import Decoded, Poison, decode
from app.records import RawRecord

BASE: dict[str, Any] = {
    "eventId": "e-1",
    "eventType": "OrderPaid",
    "eventVersion": 1,
    "aggregateVersion": 2,
    "occurredAt": "2026-07-16T10:30:00Z",
    "data": {
        "orderId": 100001,
        "userId": 20001,
        "amount": "19.90",
        "paidAt": "2026-07-16T10:31:00Z",
    },
}


def record(
    key: bytes | None, headers: tuple[tuple[str, bytes], ...] = (), **fields: Any
) -> RawRecord:
    return RawRecord("orders", 1, 5, key, orjson.dumps({**BASE, **fields}), headers)


@pytest.mark.parametrize(
    "key",
    [
        b"100001",
        b'"100001"',
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"int64","optional":false},"payload":100001}',
    ],
    ids=["raw", "json-quoted", "schema-wrapped", "schema-wrapped-integer"],
)
def test_the_key_is_the_aggregate_id(key: bytes) -> None:
    source = record(key)

    found = decode(source)

    assert isinstance(found, Decoded), found
    assert found.event.aggregate == ("ORDER", "100001")
    assert found.record is source  # the record as it came


def test_a_key_that_is_text_but_no_json_string_is_taken_as_it_is() -> None:
    found = decode(record(b'"unbalanced'))

    assert isinstance(found, Decoded)
    assert found.event.aggregate_id == '"unbalanced'


def test_the_value_wins_over_the_key_and_the_headers() -> None:
    found = decode(
        record(b"other", (("aggregateType", b"SHOP"),), aggregateId=7, aggregateType="Order")
    )

    assert isinstance(found, Decoded)
    assert found.event.aggregate == ("Order", "7")


def test_a_null_in_the_value_counts_as_absent() -> None:
    found = decode(record(b"100001", aggregateId=None, aggregateType=None))

    assert isinstance(found, Decoded)
    assert found.event.aggregate == ("ORDER", "100001")


@pytest.mark.parametrize("header", [b"SHOP", b'"SHOP"'])
def test_the_aggregate_type_header_comes_before_the_default(header: bytes) -> None:
    found = decode(record(b"100001", (("aggregateType", header),)))

    assert isinstance(found, Decoded)
    assert found.event.aggregate == ("SHOP", "100001")


def test_the_default_aggregate_type_is_the_one_configured() -> None:
    found = decode(record(b"100001"), default_aggregate_type="Payment")

    assert isinstance(found, Decoded)
    assert found.event.aggregate == ("Payment", "100001")


@pytest.mark.parametrize("key", [None, b""], ids=["no-key", "empty-key"])
def test_an_aggregate_found_nowhere_is_poison_that_says_so(key: bytes | None) -> None:
    found = decode(record(key))

    assert isinstance(found, Poison)
    assert isinstance(found.error, InvalidSchemaError)
    assert str(found.error) == (
        "envelope: aggregateId: Field required (not in the value, and the record has no key)"
    )


def test_a_key_that_is_no_utf8_text_is_poison_that_says_so() -> None:
    found = decode(record(b"\xff\xfe"))

    assert isinstance(found, Poison)
    assert isinstance(found.error, InvalidSchemaError)
    assert str(found.error) == "aggregateId: not in the value, and the record key is not UTF-8 text"


def test_a_header_that_is_no_utf8_text_is_poison_when_it_is_needed() -> None:
    source = RawRecord(
        "orders",
        1,
        5,
        b"100001",
        orjson.dumps({k: v for k, v in BASE.items() if k != "eventId"}),
        (("id", b"\xff"),),
    )

    found = decode(source)

    assert isinstance(found, Poison)
    assert str(found.error) == "eventId: not in the value, and header id is not UTF-8 text"


def test_an_id_header_of_a_binary_uuid_column_is_read_as_that_uuid() -> None:
    """Debezium's router copies a binary(16) id column's bytes into the id header as they
    are: read as the UUID (it was poison naming no eventId, which no skip could take)."""
    event_id = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    source = RawRecord(
        "orders",
        1,
        5,
        b"100001",
        orjson.dumps({k: v for k, v in BASE.items() if k != "eventId"}),
        (("id", event_id.bytes),),
    )

    found = decode(source)

    assert isinstance(found, Decoded), found
    assert found.event.event_id == str(event_id)
    printable = RawRecord(*source[:5], (("id", b"0123456789abcdef"),))
    assert decode(printable).event.event_id == "0123456789abcdef"  # type: ignore[union-attr]
