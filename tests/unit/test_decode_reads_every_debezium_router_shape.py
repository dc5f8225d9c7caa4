"""Every record Debezium's outbox event router emits with a JSON value decodes to the same event.

Contract (the bytes are the real engine's, ``debezium_shapes``): for each payload
column type, ``table.expand.json.payload`` setting and converter whose value is
JSON (the object, a JSON string holding it, either one schema-wrapped), with each
header converter's bytes (raw, JSON-quoted, schema-wrapped), the record decodes
to the one event of the outbox row; the ``__debezium.context.*`` headers change
nothing. When the value lacks ``eventId``, ``eventType`` or ``aggregateId``, the
``id`` header, the ``eventType`` header and the key (however wrapped) stand in.
The ``Struct{...}`` text of the StringConverter with ``expand`` is undecodable,
with a message naming the setting to change. The edge-case row's text survives
unwrapping (non-ASCII, escaped quotes, big integers).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest

from app.errors import UndecodableError
from app.pipeline.decode import Decoded, Poison, Read, decode, read
from app.records import RawRecord
from tests.unit.debezium_shapes import EDGE_ROW, ENVELOPE_ROW, HEADERS, Shape

STYLES = ("simple", "json", "json-schemas")
EVENT_ID = "01JY1N5H2J3Q8A5W9M7K2D4P6R"


def is_json(shape: Shape) -> bool:
    return not shape.value.startswith(b"Struct{")


def headers(style: int, names: tuple[str, ...] = tuple(HEADERS)) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, HEADERS[name][style]) for name in names)


def shape_id(shape: Shape) -> str:
    return f"{shape.column}-expand={shape.expand}-{shape.converter}"


def assert_the_row(found: Decoded | Poison) -> None:
    assert isinstance(found, Decoded), found
    event = found.event
    assert (event.event_id, event.event_type, event.event_version) == (EVENT_ID, "OrderCreated", 1)
    assert (event.aggregate_type, event.aggregate_id, event.aggregate_version) == (
        "ORDER",
        "100001",
        1,
    )
    data = event.data
    assert (data.order_id, data.order_no, data.user_id) == ("100001", "ORD202607160001", "20001")
    assert data.amount == Decimal("199")
    assert data.items == []


@pytest.mark.parametrize("style", range(3), ids=STYLES)
@pytest.mark.parametrize("shape", [s for s in ENVELOPE_ROW if is_json(s)], ids=shape_id)
def test_each_json_shape_decodes_to_the_outbox_row(shape: Shape, style: int) -> None:
    record = RawRecord("orders", 0, 7, shape.key, shape.value, headers(style))

    assert_the_row(decode(record))


@pytest.mark.parametrize("shape", [s for s in ENVELOPE_ROW if is_json(s)], ids=shape_id)
def test_the_debezium_context_headers_change_nothing(shape: Shape) -> None:
    bare = decode(RawRecord("orders", 0, 7, shape.key, shape.value))
    dressed = decode(RawRecord("orders", 0, 7, shape.key, shape.value, headers(2)))

    assert isinstance(bare, Decoded) and isinstance(dressed, Decoded)
    assert bare.event == dressed.event
    assert bare.trip == dressed.trip


def without(value: dict[str, Any], *fields: str) -> bytes:
    return orjson.dumps({k: v for k, v in value.items() if k not in fields})


# The TEXT column with the StringConverter: the payload as the producer wrote it.
PLAIN = orjson.loads(next(s.value for s in ENVELOPE_ROW if s.converter == "StringConverter"))
KEYS = {s.converter: s.key for s in ENVELOPE_ROW if s.column == "TEXT" and not s.expand}


@pytest.mark.parametrize("style", range(3), ids=STYLES)
@pytest.mark.parametrize("converter", sorted(KEYS))
def test_what_the_value_lacks_comes_from_the_headers_and_the_key(
    converter: str, style: int
) -> None:
    value = without(PLAIN, "eventId", "eventType", "aggregateId")
    record = RawRecord("orders", 0, 7, KEYS[converter], value, headers(style))

    assert_the_row(decode(record))


@pytest.mark.parametrize("style", range(3), ids=STYLES)
def test_the_aggregate_type_header_stands_in_for_the_value(style: int) -> None:
    value = without(PLAIN, "aggregateType")
    names = tuple(HEADERS)
    wire = (*headers(style, names), ("aggregateType", HEADERS["eventType"][style]))
    found = decode(RawRecord("orders", 0, 7, b"100001", value, wire))

    assert isinstance(found, Decoded)
    assert found.event.aggregate == ("OrderCreated", "100001")  # the header's bytes, unwrapped


@pytest.mark.parametrize("shape", [s for s in ENVELOPE_ROW if not is_json(s)], ids=shape_id)
def test_the_struct_text_is_undecodable_and_names_the_setting(shape: Shape) -> None:
    found = decode(RawRecord("orders", 0, 7, shape.key, shape.value, headers(0)))

    assert isinstance(found, Poison)
    assert isinstance(found.error, UndecodableError)
    assert "table.expand.json.payload=false" in str(found.error)
    assert "JsonConverter" in str(found.error)


@pytest.mark.parametrize("shape", [s for s in EDGE_ROW if is_json(s)], ids=shape_id)
def test_the_edge_case_row_survives_unwrapping(shape: Shape) -> None:
    found = read(RawRecord("orders", 0, 7, shape.key, shape.value))

    assert isinstance(found, Read)
    assert found.event_id == "EDGE-ROW-0001"
    assert found.raw["note"] == '中文 ü é "q"'
    assert found.raw["big"] == 9007199254740993
    assert found.raw["aggregateId"] == "100001"  # from the key, however it was written


@pytest.mark.parametrize("style", range(3), ids=STYLES)
def test_the_prefilter_reads_the_event_id_the_header_gives(style: int) -> None:
    value = without(PLAIN, "eventId")
    found = read(RawRecord("orders", 0, 7, b"100001", value, headers(style)))

    assert isinstance(found, Read)
    assert (found.event_id, found.event_type) == (EVENT_ID, "OrderCreated")


def test_the_prefilter_reads_an_integer_event_id_as_its_text() -> None:
    value = orjson.dumps({**PLAIN, "eventId": 700001})

    found = read(RawRecord("orders", 0, 7, b"100001", value))

    assert isinstance(found, Read) and found.event_id == "700001"
