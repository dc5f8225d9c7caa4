"""The decode stage turns every record into a typed event or a poison verdict, never an exception.

Contract: ``decode`` reads the record's bytes as a JSON object, validates the
camelCase envelope and then ``data`` against the model registered for
``(eventType, eventVersion)``. A valid event of a known type comes back as
``Decoded(known=True)`` with a typed payload; an unknown type as
``Decoded(known=False)`` with its raw ``data``. Anything else is ``Poison``
carrying the ``PoisonError`` subclass that names why (and the envelope when it
could be read), except an operator's skip for a consumer (``retry-action: skip``)
whose envelope could be read: that consumer only takes its version, so it
decodes as its envelope whatever its payload. ``read_batch`` then
``validate_batch`` keep arrival order in both lists.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest

from app.errors import InvalidSchemaError, UndecodableError, UnsupportedVersionError
from app.pipeline.decode import Decoded, Poison, decode, read_batch, validate_batch
from app.records import RawRecord
from schemas.order import OrderCreated, OrderPaid


def envelope(**overrides: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "eventId": "e-1",
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-1",
        "aggregateVersion": 2,
        "occurredAt": "2024-05-01T12:00:00Z",
        "data": {
            "orderId": "o-1",
            "userId": "u-1",
            "amount": "19.90",
            "paidAt": "2024-05-01T12:00:00Z",
        },
    }
    env.update(overrides)
    return env


def record(value: bytes | None, offset: int = 0) -> RawRecord:
    return RawRecord(topic="orders", partition=3, offset=offset, key=b"o-1", value=value)


def as_record(env: dict[str, Any], offset: int = 0) -> RawRecord:
    return record(orjson.dumps(env), offset)


def test_a_known_event_decodes_with_its_typed_payload() -> None:
    source = as_record(envelope())

    result = decode(source)

    assert isinstance(result, Decoded)
    assert result.known is True
    assert result.record is source
    assert result.event_id == "e-1"
    assert result.event.aggregate == ("Order", "o-1")
    assert result.event.aggregate_version == 2
    assert isinstance(result.event.data, OrderPaid)
    assert result.event.data.amount == Decimal("19.90")


def test_each_event_type_decodes_to_its_own_model() -> None:
    created = envelope(
        eventType="OrderCreated",
        data={
            "orderId": "o-1",
            "orderNo": "N-1",
            "userId": "u-1",
            "amount": 5,
            "items": [{"sku": "s-1", "qty": 2}],
        },
    )

    result = decode(as_record(created))

    assert isinstance(result, Decoded)
    assert isinstance(result.event.data, OrderCreated)
    assert result.event.data.items[0].qty == 2


def test_an_unknown_event_type_decodes_as_unknown_with_its_raw_data() -> None:
    result = decode(as_record(envelope(eventType="OrderShipped", data={"carrier": "DHL"})))

    assert isinstance(result, Decoded)
    assert result.known is False
    assert result.event.event_type == "OrderShipped"
    assert result.event.data == {"carrier": "DHL"}


def test_unknown_fields_in_the_envelope_and_the_payload_are_ignored() -> None:
    env = envelope(schemaRegistryId=17, headers={"x": 1})
    env["data"]["loyaltyTier"] = "gold"

    result = decode(as_record(env))

    assert isinstance(result, Decoded)
    assert result.event.data.user_id == "u-1"


POISON = [
    pytest.param(b"{nope", UndecodableError, "not JSON", id="not-json"),
    pytest.param(
        b"{eventId: 1}",
        UndecodableError,
        "not JSON: an object's key must be a quoted string at line 1 column 2",
        id="unquoted-key",
    ),
    pytest.param(b"", UndecodableError, "value is empty (0 bytes), not JSON", id="empty"),
    pytest.param(None, UndecodableError, "no value (a tombstone: a delete marker", id="tombstone"),
    pytest.param(b"\xff\xfe\x00", UndecodableError, "not JSON", id="binary"),
    pytest.param(
        b"[1, 2]", UndecodableError, "value is a JSON array, not a JSON object", id="array"
    ),
    pytest.param(b"42", UndecodableError, "value is a JSON number, not a JSON object", id="number"),
    pytest.param(b"null", UndecodableError, "value is JSON null, not a JSON object", id="null"),
    pytest.param(
        orjson.dumps({k: v for k, v in envelope().items() if k != "eventId"}),
        InvalidSchemaError,
        "envelope: eventId: Field required",
        id="no-event-id",
    ),
    pytest.param(
        orjson.dumps(envelope(eventId="")),
        InvalidSchemaError,
        "envelope: eventId:",
        id="empty-event-id",
    ),
    pytest.param(
        orjson.dumps(envelope(aggregateVersion=0)),
        InvalidSchemaError,
        "envelope: aggregateVersion:",
        id="version-zero",
    ),
    pytest.param(
        orjson.dumps(envelope(aggregateVersion="three")),
        InvalidSchemaError,
        "envelope: aggregateVersion:",
        id="version-not-a-number",
    ),
    pytest.param(
        orjson.dumps(envelope(occurredAt="yesterday")),
        InvalidSchemaError,
        "envelope: occurredAt:",
        id="bad-timestamp",
    ),
    pytest.param(
        orjson.dumps(envelope(data=["not", "an", "object"])),
        InvalidSchemaError,
        "envelope: data:",
        id="data-not-an-object",
    ),
]


@pytest.mark.parametrize(("value", "error", "message"), POISON)
def test_bytes_that_are_no_envelope_are_poison_without_an_envelope(
    value: bytes | None, error: type[Exception], message: str
) -> None:
    source = record(value)

    result = decode(source)

    assert isinstance(result, Poison)
    assert type(result.error) is error
    assert message in str(result.error)
    assert result.envelope is None
    assert result.record is source


def test_a_payload_that_fails_its_model_is_poison_with_the_envelope() -> None:
    bad = envelope()
    bad["data"] = {"orderId": "o-1", "userId": "u-1", "amount": "-1", "paidAt": "x"}

    result = decode(as_record(bad))

    assert isinstance(result, Poison)
    assert isinstance(result.error, InvalidSchemaError)
    assert result.error.reason == "invalid-schema"
    assert str(result.error).startswith("data: amount:")
    assert "paidAt" in str(result.error)
    assert result.envelope is not None
    assert result.envelope.event_id == "e-1"


def test_a_known_type_at_an_unknown_event_version_is_unsupported() -> None:
    result = decode(as_record(envelope(eventVersion=7)))

    assert isinstance(result, Poison)
    assert isinstance(result.error, UnsupportedVersionError)
    assert result.error.reason == "unsupported-version"
    assert str(result.error) == "OrderPaid has no model for eventVersion 7"
    assert result.envelope is not None
    assert result.envelope.event_id == "e-1"


def test_a_long_list_of_schema_errors_is_summarised() -> None:
    # No key either: aggregateId is missing too (aggregateType falls back to the default).
    result = decode(RawRecord(topic="orders", partition=3, offset=0, key=None, value=b"{}"))

    assert isinstance(result, Poison)
    text = str(result.error)
    assert text.count("Field required") == 5
    assert "eventId: Field required (not in the value, nor in an id header)" in text
    assert text.endswith("(+1 more)")


def test_a_batch_splits_into_events_and_poison_in_arrival_order() -> None:
    batch = [
        as_record(envelope(eventId="a"), 0),
        record(b"junk", 1),
        as_record(envelope(eventId="b"), 2),
        record(None, 3),
    ]

    reads, poison = read_batch(batch)
    events, invalid = validate_batch(reads)
    assert invalid == []

    assert [e.event_id for e in events] == ["a", "b"]
    assert [p.record.offset for p in poison] == [1, 3]


SKIP_FOR_POINTS = (
    ("dlt-original-topic", b"orders"),
    ("retry-action", b"skip"),
    ("retry-consumer-group", b"points"),
)


@pytest.mark.parametrize(
    "env",
    [envelope(data={"orderId": "o-1", "amount": "a lot"}), envelope(eventVersion=9)],
    ids=["invalid-schema", "unsupported-version"],
)
def test_a_skip_of_readable_poison_decodes_as_its_envelope(env: dict[str, Any]) -> None:
    skip = record(orjson.dumps(env))._replace(headers=SKIP_FOR_POINTS)

    found = decode(skip)

    assert isinstance(found, Decoded)
    assert (found.event.event_id, found.event.aggregate_version) == ("e-1", 2)
    assert found.trip.skip and found.trip.consumer == "points"
    assert isinstance(decode(record(orjson.dumps(env))), Poison)  # no skip: poison as ever


def test_a_skip_of_a_record_without_an_envelope_is_still_poison() -> None:
    skip = record(b"not json")._replace(headers=SKIP_FOR_POINTS)

    assert isinstance(decode(skip), Poison)
