"""Ids are read as producers write them: a JSON string or a JSON integer, one text inside.

Contract: every id of the envelope and of the Order payloads (``schemas.ids.Id``)
accepts ``100001`` and ``"100001"`` and holds the text ``"100001"`` for both, in
one pass from the JSON bytes and from a parsed dict alike (an integer beyond 64 bits
too, exact on every decode path, the Redis prefilter's included); a float, a boolean,
an object, an array or null is refused with a message naming what an id is,
and so is text longer than its column or (for an id a column stores) holding a
control character. Amounts
take a JSON number or a numeric string, not a unit. ``OrderCreated`` needs no
``items``. The example event of the design document validates verbatim.
``id_spellings`` reads an id typed at a command line either way.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import orjson
import pytest
from pydantic import BaseModel, ValidationError

from app.pipeline import decode as decoding
from app.pipeline.decode import Decoded, Poison, Read, decode
from app.records import RawRecord
from schemas.ids import Id, IdField, id_spellings, id_text
from schemas.order import OrderCreated, OrderPaid

EXAMPLE = (
    b'{"eventId": "01JY1N5H2J3Q8A5W9M7K2D4P6R", "eventType": "OrderCreated", "eventVersion": 1,'
    b' "occurredAt": "2026-07-16T10:30:00Z",'
    b' "data": {"orderId": 100001, "orderNo": "ORD202607160001", "userId": 20001,'
    b' "amount": 199.00}}'
)


class Shipment(BaseModel):
    """A user's own model, declared the documented way."""

    order_id: Id
    carrier_ref: Annotated[str, IdField(max_length=8, stored=True)]


@pytest.mark.parametrize("written", [100001, "100001"])
def test_a_string_and_an_integer_are_the_same_id(written: Any) -> None:
    raw = {"order_id": written, "carrier_ref": written}

    from_json = Shipment.model_validate_json(orjson.dumps(raw))
    from_dict = Shipment.model_validate(raw)

    assert from_json == from_dict == Shipment(order_id="100001", carrier_ref="100001")
    assert type(from_json.order_id) is str


@pytest.mark.parametrize(
    "written",
    [100001.0, 1.5, True, False, {"id": 1}, [1], None],
    ids=["float-whole", "float", "true", "false", "object", "array", "null"],
)
def test_anything_else_is_no_id(written: Any) -> None:
    raw = {"order_id": written, "carrier_ref": "c"}
    for read in (
        lambda: Shipment.model_validate_json(orjson.dumps(raw)),
        lambda: Shipment.model_validate(raw),
    ):
        with pytest.raises(ValidationError) as caught:
            read()
        (error,) = caught.value.errors()
        assert error["loc"] == ("order_id",)
        assert error["msg"] == "an id is a JSON string or a JSON integer"


@pytest.mark.parametrize(
    ("written", "kind"),
    [
        ("", "string_too_short"),
        ("a\x00b", "string_pattern_mismatch"),
        ("a\nb", "string_pattern_mismatch"),
        ("123456789", "string_too_long"),
        (123456789, "string_too_long"),
    ],
)
def test_text_the_tables_cannot_hold_is_refused(written: Any, kind: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Shipment.model_validate({"order_id": "o", "carrier_ref": written})

    assert [e["type"] for e in caught.value.errors()] == [kind]


def test_an_id_no_column_stores_may_hold_any_text() -> None:
    assert Shipment.model_validate({"order_id": "a\x00b", "carrier_ref": "c"}).order_id == "a\x00b"


def test_the_id_type_describes_itself_in_json_schema() -> None:
    schema = Shipment.model_json_schema()["properties"]

    assert schema["order_id"]["anyOf"] == [{"type": "string", "minLength": 1}, {"type": "integer"}]
    assert {"type": "string", "minLength": 1, "maxLength": 8} in schema["carrier_ref"]["anyOf"]


@pytest.mark.parametrize(
    ("amount", "expected"),
    [(199.00, Decimal("199")), ("199.00", Decimal("199.00")), (0.1, Decimal("0.1")), (5, 5)],
)
def test_an_amount_is_a_json_number_or_a_numeric_string(amount: Any, expected: Decimal) -> None:
    paid = OrderPaid.model_validate_json(
        orjson.dumps(
            {"orderId": 1, "userId": 2, "amount": amount, "paidAt": "2026-07-16T10:30:00Z"}
        )
    )

    assert paid.amount == expected


@pytest.mark.parametrize("amount", ["199.00 CNY", "lots", True, "NaN", {"value": 1}])
def test_an_amount_with_a_unit_or_of_another_type_is_refused(amount: Any) -> None:
    with pytest.raises(ValidationError):
        OrderPaid.model_validate(
            {"orderId": 1, "userId": 2, "amount": amount, "paidAt": "2026-07-16T10:30:00Z"}
        )


def test_order_created_without_items_reserves_nothing() -> None:
    created = OrderCreated.model_validate({"orderId": 1, "orderNo": "N", "userId": 2, "amount": 1})

    assert created.items == []


def test_the_design_documents_example_event_decodes_verbatim() -> None:
    record = RawRecord("orders", 0, 0, b"100001", EXAMPLE)

    found = decode(record)

    assert isinstance(found, Decoded), found
    event = found.event
    assert (event.event_id, event.aggregate_type, event.aggregate_id) == (
        "01JY1N5H2J3Q8A5W9M7K2D4P6R",
        "ORDER",
        "100001",
    )
    assert (event.data.order_id, event.data.user_id, event.data.amount) == (
        "100001",
        "20001",
        Decimal("199"),
    )
    assert event.data.items == []


BIG = 123456789012345678901234567890  # beyond 64 bits: a DECIMAL(38) or NUMBER key


@pytest.mark.parametrize("wrapped", [False, True], ids=["object", "json-string"])
def test_an_integer_beyond_64_bits_is_the_same_id_on_every_decode_path(wrapped: bool) -> None:
    text = EXAMPLE.replace(b'"orderId": 100001', f'"orderId": {BIG}'.encode()).replace(
        b'"eventId": "01JY1N5H2J3Q8A5W9M7K2D4P6R"', f'"eventId": {BIG}'.encode()
    )
    value = orjson.dumps(text.decode()) if wrapped else text
    source = RawRecord("orders", 0, 0, b"100001", value)

    first = decoding.read(source)
    assert isinstance(first, Read)
    for found in (decode(source), decoding.validate(first)):
        assert isinstance(found, Decoded), found
        assert (found.event_id, found.event.data.order_id) == (str(BIG), str(BIG))


@pytest.mark.parametrize(
    ("field", "written"),
    [("eventId", 1.0), ("aggregateId", True), ("eventId", {"id": 1})],
)
def test_an_envelope_id_of_another_type_is_poison_that_says_so(field: str, written: Any) -> None:
    value = orjson.loads(EXAMPLE)
    value[field] = written

    found = decode(RawRecord("orders", 0, 0, b"100001", orjson.dumps(value)))

    assert isinstance(found, Poison)
    assert found.error.reason == "invalid-schema"
    assert f"{field}: an id is a JSON string or a JSON integer, not {written!r}" in str(found.error)


def test_id_text_gives_the_one_canonical_form() -> None:
    assert id_text(100001) == id_text("100001") == "100001"
    assert [id_text(v) for v in (1.0, True, None, [1])] == [None, None, None, None]


@pytest.mark.parametrize(
    ("typed", "spellings"),
    [
        ("100001", ["100001"]),
        ('"100001"', ["100001", '"100001"']),
        ("order-1", ["order-1"]),
        ('"order-1"', ["order-1", '"order-1"']),
        ("007", ["007"]),
    ],
)
def test_an_id_typed_at_a_command_line_is_read_either_way(typed: str, spellings: list[str]) -> None:
    assert id_spellings(typed) == spellings
