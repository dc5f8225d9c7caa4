"""Decoding from the bytes in one pass gives exactly what reading then validating gives.

Contract: ``decode`` first tries the common case in one pass (the model chosen
by the envelope's own ``eventType`` and ``eventVersion`` as the JSON text is
validated, each version of a type by its own model; ids as strings or integers, the
aggregate in the value or in the key); whatever it returns equals what
``validate(read(record))`` returns for the same record: the same event, the same
payload model, the same ``known``. Where the bytes could mislead (a nested or
repeated key, an escaped name, a version written as a float) both agree too; where
the record is not a valid event (a version with no model, a payload that fails), the
one-pass attempt gives up and the two-step path decides, so bad input is still
explained by ``read`` and ``validate``.

Both paths take every envelope field from the same place (``wire.SOURCES``), for
any record: generated records (each envelope field spelled camelCase,
snake_case, ``null`` or left out, ids as strings or integers; the value as a
JSON object, a JSON string holding it, or schema-wrapped; no key, an empty one,
or a key as text, JSON-quoted, a JSON number or schema-wrapped, ``null`` too,
naming the value's aggregate or another; the ``id``, ``eventType`` and
``aggregateType`` headers present or not, agreeing with the value or not; each
set of payloads to validate) give the same event, ``known`` and trip, or poison
of the same class with the same message, in both. Before, a value spelling
``aggregate_id`` (or ``aggregate_type``) took the aggregate from the key (or
header) in one pass and from the value in two steps; which path ran depended on
whether ``REDIS_URL`` was set.
"""

from __future__ import annotations

from collections.abc import Container
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from app.demo.envelopes import envelope, order_paid_data
from app.demo.spellings import Spelling, numbered, spell
from app.pipeline.decode import Decoded, Poison, _decode_json, decode, read, validate
from app.records import RawRecord
from bench.workload import make_workload
from schemas.order import OrderCancelled, OrderPaid
from schemas.registry import event_model


def as_record(value: bytes, offset: int = 0) -> RawRecord:
    return RawRecord("orders", 0, offset, b"o-1", value)


def two_step(source: RawRecord, payloads: Container[str] | None = None) -> Decoded | Poison:
    item = read(source)
    return validate(item, payloads) if not isinstance(item, Poison) else item


PAID_AT = datetime(2024, 5, 1, 12, tzinfo=UTC)
PAID = order_paid_data("o-1", "u-1", 1990, PAID_AT)


def paid(**overrides: Any) -> dict[str, Any]:
    env = envelope("OrderPaid", "o-1", 2, PAID, event_id="e-1", occurred_at=PAID_AT)
    env.update(overrides)
    return env


def assert_same(one_pass: Decoded | Poison, reference: Decoded | Poison) -> None:
    assert isinstance(one_pass, Decoded) and isinstance(reference, Decoded)
    assert one_pass.known == reference.known
    assert type(one_pass.event.data) is type(reference.event.data)
    assert one_pass.event == reference.event
    assert one_pass.trip == reference.trip


def test_every_event_of_a_workload_decodes_in_one_pass_to_what_two_steps_give() -> None:
    messages = make_workload(300).messages
    assert len(messages) > 600

    for offset, message in enumerate(messages):
        source = as_record(message.value, offset)
        one_pass = _decode_json(source, None)
        assert one_pass is not None, message.value  # the common case takes the one pass
        assert_same(one_pass, two_step(source))
        assert_same(decode(source), one_pass)


def test_integer_ids_and_the_aggregate_in_the_key_take_the_one_pass_too() -> None:
    messages = spell(numbered(make_workload(100)), Spelling.NUMBERS)

    for offset, message in enumerate(messages):
        source = RawRecord("orders", 0, offset, message.key, message.value)
        one_pass = _decode_json(source, None)
        assert one_pass is not None, message
        assert_same(one_pass, two_step(source))


@pytest.mark.parametrize(
    "value",
    [
        # the aggregate fields written with an escape: the value's own still win
        orjson.dumps(paid()).replace(b'"aggregateId"', b'"aggregate\\u0049d"'),
        orjson.dumps(paid(aggregateId=None)),
        orjson.dumps({k: v for k, v in paid().items() if k != "aggregateType"}),
    ],
    ids=["escaped-aggregate-id", "null-aggregate-id", "no-aggregate-type"],
)
def test_an_aggregate_from_the_record_is_the_same_in_both_paths(value: bytes) -> None:
    source = RawRecord("orders", 0, 0, b'"o-9"', value, (("aggregateType", b"SHOP"),))

    assert_same(decode(source), two_step(source))


def test_a_payload_nobody_here_reads_stays_raw_in_both_paths() -> None:
    source = as_record(orjson.dumps(paid()))

    one_pass = _decode_json(source, {"OrderCreated"})

    assert one_pass is not None
    assert one_pass.event.data == PAID
    assert_same(one_pass, two_step(source, {"OrderCreated"}))


def test_a_nested_event_type_seen_first_does_not_choose_the_model() -> None:
    # The payload carries another event's type and version ahead of the envelope's own.
    env = {
        "data": {"eventType": "OrderCancelled", "eventVersion": 1, **PAID},
        **{k: v for k, v in paid().items() if k != "data"},
    }
    source = as_record(orjson.dumps(env))

    result = decode(source)

    assert isinstance(result, Decoded)
    assert isinstance(result.event.data, OrderPaid)
    assert not isinstance(result.event.data, OrderCancelled)
    assert_same(result, two_step(source))


@pytest.mark.parametrize(
    "value",
    [
        # the name written with a JSON escape: the guess finds nothing and gives up
        orjson.dumps(paid()).replace(b'"OrderPaid"', b'"Order\\u0050aid"'),
        # the version written as a float: not what the guess reads
        orjson.dumps(paid()).replace(b'"eventVersion":1', b'"eventVersion":1.0'),
        # the same key twice: the last one counts, in both paths
        orjson.dumps(paid())[:-1] + b',"eventType":"OrderPaid"}',
    ],
    ids=["escaped-name", "float-version", "repeated-key"],
)
def test_bytes_that_mislead_the_guess_decode_as_the_two_step_path_does(value: bytes) -> None:
    assert value != orjson.dumps(paid())  # the case really differs from the plain event
    source = as_record(value)

    assert_same(decode(source), two_step(source))


@pytest.mark.parametrize(
    "value",
    [
        b"not json",
        b'"eventType":"OrderPaid","eventVersion":1',
        orjson.dumps(paid(eventVersion=7)),
        orjson.dumps(paid(data={"orderId": "o-1"})),
        orjson.dumps(paid(eventId="")),
    ],
    ids=["not-json", "fragment", "unknown-version", "bad-payload", "empty-event-id"],
)
def test_bad_input_is_explained_by_the_two_step_path(value: bytes) -> None:
    source = as_record(value)

    assert _decode_json(source, None) is None
    result = decode(source)
    assert isinstance(result, Poison)
    reference = two_step(source)
    assert isinstance(reference, Poison)
    assert type(result.error) is type(reference.error)
    assert str(result.error) == str(reference.error)


# Generated records: every accepted spelling, key form and header combination.

OCCURRED_AT = "2024-05-01T12:00:00Z"
DATA = {
    "OrderPaid": {"orderId": "o-1", "userId": "u-1", "amount": "10.00", "paidAt": OCCURRED_AT},
    "OrderCancelled": {"orderId": "o-1", "userId": "u-1"},
    "ShipmentBooked": {"anything": True},  # a type no model reads
}


def same(one: Decoded | Poison, other: Decoded | Poison) -> bool:
    if isinstance(one, Decoded) and isinstance(other, Decoded):
        return (
            one.event == other.event
            and type(one.event.data) is type(other.event.data)
            and one.known == other.known
            and one.trip == other.trip
        )
    if isinstance(one, Poison) and isinstance(other, Poison):
        return (type(one.error), str(one.error), one.envelope) == (
            type(other.error),
            str(other.error),
            other.envelope,
        )
    return False


ids = st.sampled_from(["e-1", "e 2", 7, 100001])
aggregate_ids = st.sampled_from(["o-1", "o-9", 42, "o-1 "])
key_texts = st.sampled_from(["o-1", "o-9", "42", "k"])


@st.composite
def fields(
    draw: st.DrawFn, camel: str, snake: str, values: st.SearchStrategy[Any]
) -> dict[str, Any]:
    """The field under its camelCase or snake_case name (or both), ``null``, or absent; most
    often as producers write it (camelCase), so that most records are events."""
    names = draw(st.sampled_from([(camel,)] * 4 + [(snake,), (snake,), (camel, snake), ()]))
    return {name: draw(values) if draw(st.integers(0, 11)) else None for name in names}


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    event_type = draw(st.sampled_from(sorted(DATA)))
    env: dict[str, Any] = {}
    env |= draw(fields("eventId", "event_id", ids))
    env |= draw(fields("eventType", "event_type", st.just(event_type)))
    env |= draw(fields("eventVersion", "event_version", st.sampled_from([1, 1, 1, 2])))
    env |= draw(fields("aggregateType", "aggregate_type", st.sampled_from(["Order", "Shop"])))
    env |= draw(fields("aggregateId", "aggregate_id", aggregate_ids))
    env |= draw(fields("aggregateVersion", "aggregate_version", st.sampled_from([1, 3])))
    env["occurredAt"] = OCCURRED_AT
    env["data"] = DATA[event_type]
    # Keys in any order: the one pass reads the bytes, where order may matter.
    return dict(draw(st.permutations(list(env.items()))))


def wrapped(text: str, how: str) -> bytes:
    if how == "plain":
        return text.encode()
    if how == "quoted":
        return orjson.dumps(text)
    if how == "number":
        return text.encode() if text.isdigit() else orjson.dumps(text)
    return orjson.dumps({"schema": {"type": "string"}, "payload": text})


@st.composite
def keys(draw: st.DrawFn) -> bytes | None:
    form = draw(st.sampled_from(["none", "empty", "plain", "quoted", "number", "wrapped", "null"]))
    if form == "none":
        return None
    if form == "empty":
        return b""
    if form == "null":
        return orjson.dumps({"schema": {"type": "string"}, "payload": None})
    return wrapped(draw(key_texts), form)


@st.composite
def headers(draw: st.DrawFn) -> tuple[tuple[str, bytes], ...]:
    found: list[tuple[str, bytes]] = []
    for name, values in (
        ("id", ["e-1", "h-1", "7"]),
        ("eventType", ["OrderPaid", "OrderCancelled", "ShipmentBooked"]),
        ("aggregateType", ["Order", "Shop"]),
    ):
        if draw(st.booleans()):
            form = draw(st.sampled_from(["plain", "quoted", "wrapped"]))
            found.append((name, wrapped(draw(st.sampled_from(values)), form)))
    return tuple(draw(st.permutations(found)))


@st.composite
def records(draw: st.DrawFn) -> RawRecord:
    env = draw(envelopes())
    text = orjson.dumps(env).decode()
    value = draw(
        st.sampled_from(
            [
                text.encode(),
                text.encode(),
                text.encode(),
                orjson.dumps(text),
                orjson.dumps({"schema": {"type": "string"}, "payload": text}),
                orjson.dumps({"schema": {"type": "struct"}, "payload": env}),
            ]
        )
    )
    return RawRecord("orders", 0, 5, draw(keys()), value, draw(headers()))


payload_sets = st.sampled_from([None, {"OrderPaid"}, {"OrderCreated"}, set()])


# Deterministic (the same examples on every run), and without the explain phase.
@settings(
    max_examples=800,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(record=records(), payloads=payload_sets)
def test_one_pass_and_two_steps_agree_on_every_record(
    record: RawRecord, payloads: set[str] | None
) -> None:
    one_pass, reference = decode(record, payloads), two_step(record, payloads)

    assert same(one_pass, reference), (one_pass, reference)


def test_a_snake_case_aggregate_id_beside_another_key_is_the_values_in_both_paths() -> None:
    env = {
        "eventId": "e-1",
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregate_type": "Order",
        "aggregate_id": "o-1",
        "occurredAt": OCCURRED_AT,
        "data": DATA["OrderPaid"],
    }
    record = RawRecord("orders", 0, 0, b"o-9", orjson.dumps(env), (("aggregateType", b"Shop"),))

    for result in (decode(record), two_step(record)):
        assert isinstance(result, Decoded)
        assert result.event.aggregate == ("Order", "o-1")


# A type with two versions, each its own model: the one pass picks each version's.


@event_model("Rated", version=1)
class RatedV1(BaseModel):
    stars: int


@event_model("Rated", version=2)
class RatedV2(BaseModel):
    stars: int
    comment: str


def rated(version: int, data: dict[str, Any]) -> RawRecord:
    env = envelope("Rated", "o-1", 1, data, event_id=f"r-{version}", occurred_at=PAID_AT)
    return as_record(orjson.dumps({**env, "eventType": "Rated", "eventVersion": version}))


@pytest.mark.parametrize("payloads", [None, frozenset({"Rated"}), {"Rated", "OrderPaid"}])
def test_each_version_of_a_type_is_read_by_its_own_model(payloads: Any) -> None:
    first = _decode_json(rated(1, {"stars": 4}), payloads)
    second = _decode_json(rated(2, {"stars": 5, "comment": "fine"}), payloads)

    assert first is not None and second is not None
    assert isinstance(first.event.data, RatedV1) and first.known
    assert isinstance(second.event.data, RatedV2) and second.known
    assert_same(first, two_step(rated(1, {"stars": 4}), payloads))
    assert_same(second, two_step(rated(2, {"stars": 5, "comment": "fine"}), payloads))


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (rated(3, {"stars": 1}), "Rated has no model for eventVersion 3"),
        (rated(2, {"stars": 5}), "data: comment: Field required"),  # v1's shape as v2
    ],
    ids=["no-model-for-the-version", "a-version-its-payload-fails"],
)
def test_a_version_that_cannot_be_read_is_left_to_the_two_step_path(
    source: RawRecord, said: str
) -> None:
    assert _decode_json(source, None) is None
    result = decode(source)
    assert isinstance(result, Poison)
    assert said in str(result.error)


def test_a_type_this_worker_skips_is_read_raw_whatever_its_version() -> None:
    for version in (1, 2, 3):
        found = _decode_json(rated(version, {"anything": True}), frozenset({"OrderPaid"}))
        assert found is not None
        assert found.event.data == {"anything": True}
        assert found.known  # a model exists for some version of it
