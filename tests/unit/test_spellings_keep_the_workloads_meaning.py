"""One workload written three ways decodes to the same events, in the same order.

Contract: ``numbered`` keeps a workload's meaning (the same expected state, up
to the new ids) with every id a number written as text, and a series of its own
shares no user, order, event or sku with another while meaning the same; ``spell`` writes it with
string ids, with integer ids (the aggregate in the value or only in the key,
the aggregate type in the value or left to the default), and as Debezium's
outbox router emits it (six value shapes, three header converters). Each way
really differs on the wire, and every record decodes to the same event as the
string spelling's, so a consumer's state cannot depend on the spelling.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from app.demo.debezium import HEADER_STYLES
from app.demo.envelopes import Message
from app.demo.spellings import Spelling, in_series, numbered, series_zero, spell
from app.demo.workload import Workload, generate
from app.pipeline.decode import Decoded, decode
from app.records import RawRecord


@pytest.fixture(scope="module")
def workload() -> Workload:
    return numbered(generate(orders=120, users=15, seed=3))


def decoded(messages: list[Message]) -> list[Any]:
    events = []
    for offset, message in enumerate(messages):
        found = decode(RawRecord("orders", 0, offset, message.key, message.value, message.headers))
        assert isinstance(found, Decoded), (found, message)
        events.append(found.event)
    return events


def test_numbering_keeps_the_meaning(workload: Workload) -> None:
    original = generate(orders=120, users=15, seed=3)

    assert sorted(workload.expected.points.values()) == sorted(original.expected.points.values())
    assert workload.expected.reserved == original.expected.reserved
    assert workload.expected.distinct_events == original.expected.distinct_events
    assert all(user.isdigit() for user in workload.expected.points)
    assert workload.duplicates == original.duplicates > 0


def test_a_series_is_the_same_workload_under_ids_of_its_own(workload: Workload) -> None:
    other = numbered(generate(orders=120, users=15, seed=3), series=2)

    assert {in_series(u) for u in other.expected.points} == {2}
    assert {in_series(sku) for sku in other.expected.reserved} == {2}
    assert {series_zero(u): v for u, v in other.expected.points.items()} == (
        workload.expected.points
    )
    assert {series_zero(k): v for k, v in other.expected.reserved.items()} == (
        workload.expected.reserved
    )
    assert not {p.order_id for p in workload.plans} & {p.order_id for p in other.plans}


@pytest.mark.parametrize("spelling", [Spelling.NUMBERS, Spelling.DEBEZIUM])
def test_every_spelling_decodes_to_the_string_spellings_events(
    workload: Workload, spelling: Spelling
) -> None:
    reference = decoded(spell(workload, Spelling.STRINGS))

    assert decoded(spell(workload, spelling)) == reference


def test_the_numbers_spelling_writes_integers_and_leaves_the_aggregate_to_the_record(
    workload: Workload,
) -> None:
    values = [orjson.loads(m.value) for m in spell(workload, Spelling.NUMBERS)]

    assert all(type(v["eventId"]) is int and type(v["data"]["userId"]) is int for v in values)
    assert Counter("aggregateId" in v for v in values).keys() == {True, False}
    assert Counter("aggregateType" in v for v in values).keys() == {True, False}
    assert any(isinstance(v["data"].get("amount"), str) for v in values)


def test_the_debezium_spelling_uses_every_shape_and_header_converter(workload: Workload) -> None:
    messages = spell(workload, Spelling.DEBEZIUM)

    wrapped = b'{"schema":{"type":"string","optional":false'
    shapes = {
        "object": lambda v: v.startswith(b'{"') and not v.startswith(b'{"schema"'),
        "JSON string": lambda v: v.startswith(b'"{'),
        "wrapped string": lambda v: v.startswith(wrapped + b'},"payload":"{'),
        "wrapped JSONB text": lambda v: v.startswith(wrapped + b',"name":"io.debezium.data.Json"'),
        "wrapped struct": lambda v: v.startswith(b'{"schema":{"type":"struct"'),
    }
    for name, is_shape in shapes.items():
        assert any(is_shape(m.value) for m in messages), name
    assert len({m.key[:1] for m in messages if m.key}) == 3  # raw, quoted, wrapped
    assert len({dict(m.headers)["id"][:1] for m in messages}) == HEADER_STYLES
