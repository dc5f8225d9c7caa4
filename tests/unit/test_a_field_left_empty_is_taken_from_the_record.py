"""A field a producer left empty is taken from the record, as if it were absent.

Contract: in the value, ``""`` or ``null`` under ``eventId``, ``eventType``,
``aggregateId`` or ``aggregateType`` (a Go struct's zero value, a NULL column) is
supplied by the record as an absent field is: the ``id`` or ``eventType`` header,
the key, the ``aggregateType`` header or the default type. A key or header
holding JSON's ``null`` (Kafka Connect's JsonConverter for a NULL column, Go's
``json.Marshal(nil)``) is no value: never the text ``"null"``, so keyless events
do not share one aggregate. A field under its snake_case name is read by both
decode paths (the one the Redis prefilter takes too) as its camelCase one. With
nothing to supply it, an empty field stays poison; so does a schema-wrapped key that
holds no id (a struct, a boolean, a number with a fraction), its type named, instead of
the wrapper's JSON text taken for the id.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.pipeline.decode import Decoded, Poison, Read, decode, read, validate
from app.records import RawRecord
from app.settings import DEFAULT_AGGREGATE_TYPE
from schemas.order import OrderPaid
from tests.pipeline.events import envelope

ENVELOPE: dict[str, Any] = envelope("e-1", version=2)


def record(
    value: dict[str, Any], key: bytes | None = b"o-9", headers: tuple[tuple[str, bytes], ...] = ()
) -> RawRecord:
    return RawRecord("orders", 0, 7, key, orjson.dumps(value), headers)


def both_paths(source: RawRecord) -> list[Decoded | Poison]:
    """``decode`` in one pass, and ``read`` then ``validate`` (the prefilter's path)."""
    first = read(source)
    second = validate(first) if isinstance(first, Read) else first
    return [decode(source), second]


@pytest.mark.parametrize("empty", ["", None], ids=["empty-text", "null"])
@pytest.mark.parametrize(
    ("field", "headers", "expected"),
    [
        ("eventId", (("id", b"e-9"),), ("event_id", "e-9")),
        ("eventType", (("eventType", b"OrderPaid"),), ("event_type", "OrderPaid")),
        ("aggregateId", (), ("aggregate", ("Order", "o-9"))),
        ("aggregateType", (("aggregateType", b"Shipment"),), ("aggregate", ("Shipment", "o-1"))),
        ("aggregateType", (), ("aggregate", (DEFAULT_AGGREGATE_TYPE, "o-1"))),
    ],
)
def test_an_empty_field_is_supplied_by_the_record(
    empty: str | None, field: str, headers: tuple[tuple[str, bytes], ...], expected: Any
) -> None:
    source = record({**ENVELOPE, field: empty}, headers=headers)
    attribute, value = expected

    for result in both_paths(source):
        assert isinstance(result, Decoded), result
        assert getattr(result.event, attribute) == value
        assert isinstance(result.event.data, OrderPaid)


@pytest.mark.parametrize("field", ["eventId", "aggregateId"])
def test_an_empty_field_with_nothing_to_supply_it_stays_poison(field: str) -> None:
    source = record({**ENVELOPE, field: ""}, key=None)

    for result in both_paths(source):
        assert isinstance(result, Poison)
        assert field in str(result.error)


@pytest.mark.parametrize("null", [b"null", b'{"schema": {"type": "string"}, "payload": null}'])
def test_a_null_key_is_no_aggregate_id(null: bytes) -> None:
    value = {name: v for name, v in ENVELOPE.items() if name != "aggregateId"}
    keyless = [record({**value, "eventId": f"e-{n}"}, key=null) for n in (1, 2)]

    for source in keyless:
        for result in both_paths(source):
            assert isinstance(result, Poison)
            assert "aggregateId: Field required" in str(result.error)


@pytest.mark.parametrize(
    ("header", "field"),
    [("id", "event_id"), ("eventType", "event_type"), ("aggregateType", "aggregate_type")],
)
def test_a_null_header_is_no_value(header: str, field: str) -> None:
    value = {name: v for name, v in ENVELOPE.items() if name != _camel(field)}
    source = record(value, headers=((header, b"null"),))

    results = both_paths(source)
    if field == "aggregate_type":  # the default type, not "null"
        for result in results:
            assert isinstance(result, Decoded)
            assert result.event.aggregate_type == DEFAULT_AGGREGATE_TYPE
        return
    for result in results:
        assert isinstance(result, Poison)
        assert f"{_camel(field)}: Field required" in str(result.error)


def test_a_snake_case_event_id_is_read_by_both_paths() -> None:
    value = {name: v for name, v in ENVELOPE.items() if name not in ("eventId", "eventType")}
    source = record({**value, "event_id": "e-5", "event_type": "OrderPaid"})

    first = read(source)
    assert isinstance(first, Read)
    assert (first.event_id, first.event_type) == ("e-5", "OrderPaid")
    for result in both_paths(source):
        assert isinstance(result, Decoded)
        assert (result.event_id, result.event.event_type) == ("e-5", "OrderPaid")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        (b'{"schema": {"type": "boolean"}, "payload": true}', "a JSON boolean"),
        (b'{"schema": {"type": "struct"}, "payload": {"id": 7}}', "a JSON object"),
        (b'{"schema": {"type": "double"}, "payload": 7.5}', "a JSON number"),
    ],
)
def test_a_wrapped_key_holding_no_id_is_poison_naming_its_type(key: bytes, kind: str) -> None:
    value = {name: v for name, v in ENVELOPE.items() if name != "aggregateId"}

    for result in both_paths(record(value, key=key)):
        assert isinstance(result, Poison)
        assert f"a Kafka Connect value holding {kind}, not text or an integer" in str(result.error)


@pytest.mark.parametrize(
    ("key", "kind"),
    [(b'{"id": "o-9"}', "a JSON object"), (b'["o-9"]', "a JSON array")],
    ids=["object", "array"],
)
def test_a_key_that_is_a_json_object_or_array_is_poison_when_it_must_stand_in(
    key: bytes, kind: str
) -> None:
    """Kafka Connect's JsonConverter writes a struct key as ``{"id": ...}`` without schemas:
    taken as text it would be an aggregate of its own, the same order's events keyed by
    the id's text another one, and their versions would wait for each other forever."""
    value = {name: v for name, v in ENVELOPE.items() if name != "aggregateId"}

    for result in both_paths(record(value, key=key)):
        assert isinstance(result, Poison)
        assert f"the record key is {kind}, not text or an integer" in str(result.error)
    # With the aggregate in the value, the key is not read: the event is fine.
    for result in both_paths(record(ENVELOPE, key=key)):
        assert isinstance(result, Decoded)
        assert result.event.aggregate_id == ENVELOPE["aggregateId"]


def test_a_value_that_starts_with_a_byte_order_mark_is_read_without_it() -> None:
    """Some Windows tools write UTF-8 with a byte order mark; JSON's RFC lets a reader
    ignore it, and the event is the same as without it."""
    plain = record(ENVELOPE)
    marked = plain._replace(value=b"\xef\xbb\xbf" + plain.value)

    for result in both_paths(marked):
        assert isinstance(result, Decoded)
        assert result.event == decode(plain).event
