"""Decoding from the bytes in one pass gives exactly what reading then validating gives.

Contract: ``decode`` first tries the common case in one pass (the model chosen
by the ``eventType`` and ``eventVersion`` the bytes name, validated straight
from the JSON text; ids as strings or integers, the aggregate in the value or
in the key); whatever it returns equals what ``validate(read(record))``
returns for the same record: the same event, the same payload model, the same
``known``. Where the bytes mislead the guess (a nested or repeated key, an
escaped name, a version written as a float) or the record is not a valid event,
the one-pass attempt gives up and the two-step path decides, so bad input is
still explained by ``read`` and ``validate``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from app.demo.envelopes import envelope, order_paid_data
from app.demo.spellings import Spelling, numbered, spell
from app.pipeline.decode import Decoded, Poison, _decode_json, decode, read, validate
from app.records import RawRecord
from bench.workload import make_workload
from schemas.order import OrderCancelled, OrderPaid


def as_record(value: bytes, offset: int = 0) -> RawRecord:
    return RawRecord("orders", 0, offset, b"o-1", value)


def two_step(source: RawRecord, payloads: set[str] | None = None) -> Decoded | Poison:
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
