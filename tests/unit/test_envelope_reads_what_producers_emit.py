"""The envelope reads the camelCase JSON producers emit and tolerates what it does not know.

Contract: ``Envelope`` and the payload models accept camelCase keys (and the
snake_case field names), ignore unknown fields, require the identity fields
(non-empty, bounded to what the framework's tables store: as long as their
columns, no control character, versions within 32 bits; ids a JSON string or
integer), leave ``aggregateVersion`` optional but at least 1, are
immutable, and dump back to camelCase. ``occurredAt`` is ISO-8601 (an offset of hours
alone too, ``+00`` as PostgreSQL writes a ``timestamptz`` as text) or seconds since the
epoch, always an aware datetime: a time without an offset is UTC (a Java
``LocalDateTime``), so handlers never get naive and aware times mixed. ``schemas.registry`` maps
``(eventType, eventVersion)`` to one model: re-registering the same model is
harmless, a different model for a taken slot is a ``ConfigurationError`` naming both.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.errors import ConfigurationError
from schemas import Envelope, event_model, is_known_event_type, model_for
from schemas.order import OrderCancelled, OrderCreated, OrderPaid


def raw(**overrides: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "eventId": "e-1",
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-1",
        "aggregateVersion": 4,
        "occurredAt": "2024-05-01T12:00:00Z",
        "traceId": "t-1",
        "tenantId": "acme",
        "data": {"orderId": "o-1"},
    }
    env.update(overrides)
    return env


def test_the_largest_storable_version_is_accepted() -> None:
    env = Envelope[dict[str, Any]].model_validate(raw(aggregateVersion=2**31 - 1))

    assert env.aggregate_version == 2**31 - 1


def test_camel_case_keys_fill_the_fields() -> None:
    env = Envelope[dict[str, Any]].model_validate(raw())

    assert env.event_id == "e-1"
    assert env.event_version == 1
    assert env.aggregate == ("Order", "o-1")
    assert env.aggregate_version == 4
    assert env.occurred_at == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert (env.trace_id, env.tenant_id, env.source) == ("t-1", "acme", None)


def test_snake_case_field_names_are_accepted_too() -> None:
    env = Envelope[dict[str, Any]].model_validate(
        {
            "event_id": "e-1",
            "event_type": "OrderPaid",
            "event_version": 1,
            "aggregate_type": "Order",
            "aggregate_id": "o-1",
            "occurred_at": "2024-05-01T12:00:00Z",
            "data": {},
        }
    )

    assert env.event_id == "e-1"
    assert env.aggregate_version is None


def test_unknown_fields_are_ignored() -> None:
    env = Envelope[dict[str, Any]].model_validate(raw(schemaVersion="2.1", partitionHint=3))

    assert "schemaVersion" not in env.model_dump(by_alias=True)


def test_it_dumps_back_to_camel_case() -> None:
    dumped = Envelope[dict[str, Any]].model_validate(raw()).model_dump(by_alias=True, mode="json")

    assert dumped["eventId"] == "e-1"
    assert dumped["aggregateVersion"] == 4
    assert dumped["data"] == {"orderId": "o-1"}


@pytest.mark.parametrize(
    "overrides",
    [
        {"eventId": ""},
        {"eventId": "x" * 129},
        {"eventType": ""},
        {"aggregateId": "x" * 129},
        {"aggregateType": "x" * 101},
        {"eventVersion": 0},
        {"aggregateVersion": 0},
        {"aggregateVersion": -1},
        {"occurredAt": "not a time"},
        # What the framework's tables cannot store: 32-bit versions, no NUL or control char.
        {"aggregateVersion": 2**31},
        {"eventVersion": 2**31},
        {"eventId": "e\x001"},
        {"aggregateId": "o\x01"},
        {"eventType": "OrderPaid\n"},
        {"aggregateType": "\x00Order"},
        {"eventId": 1.0},
        {"aggregateId": True},
    ],
)
def test_bad_identity_fields_are_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Envelope[dict[str, Any]].model_validate(raw(**overrides))


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("2026-12-01T10:00:00Z", datetime(2026, 12, 1, 10, tzinfo=UTC)),
        ("2026-12-01 10:00:00+00", datetime(2026, 12, 1, 10, tzinfo=UTC)),
        ("2026-12-01T10:00:00.25-05", datetime(2026, 12, 1, 15, 0, 0, 250_000, tzinfo=UTC)),
        ("2026-12-01T10:00:00", datetime(2026, 12, 1, 10, tzinfo=UTC)),
        ("2026-12-01T12:00:00+02:00", datetime(2026, 12, 1, 10, tzinfo=UTC)),
        (1_764_583_200, datetime(2025, 12, 1, 10, tzinfo=UTC)),
    ],
)
def test_occurred_at_is_read_as_producers_write_it_and_is_always_aware(
    written: Any, read: datetime
) -> None:
    env = Envelope[dict[str, Any]].model_validate_json(json.dumps(raw(occurredAt=written)).encode())

    assert env.occurred_at == read and env.occurred_at.tzinfo is not None


def test_a_wrong_time_with_an_hours_offset_says_what_was_written() -> None:
    with pytest.raises(ValidationError, match="2026-13-01T10:00:00\\+00'"):
        Envelope[dict[str, Any]].model_validate(raw(occurredAt="2026-13-01T10:00:00+00"))


def test_the_envelope_is_immutable() -> None:
    env = Envelope[dict[str, Any]].model_validate(raw())

    with pytest.raises(ValidationError):
        env.event_id = "other"  # type: ignore[misc]


def test_order_payloads_read_camel_case_and_ignore_extras() -> None:
    created = OrderCreated.model_validate(
        {
            "orderId": "o-1",
            "orderNo": "N-1",
            "userId": "u-1",
            "amount": "10.50",
            "items": [{"sku": "s-1", "qty": 2, "colour": "red"}],
            "coupon": "X",
        }
    )

    assert created.amount == Decimal("10.50")
    assert created.items[0].sku == "s-1"
    assert OrderCancelled.model_validate({"orderId": "o", "userId": "u"}).reason is None


@pytest.mark.parametrize(
    "data",
    [
        {"orderId": "o", "orderNo": "n", "userId": "u", "amount": -1, "items": []},
        {
            "orderId": "o",
            "orderNo": "n",
            "userId": "u",
            "amount": 1,
            "items": [{"sku": "s", "qty": 0}],
        },
        {
            "orderId": "o",
            "orderNo": "n",
            "userId": "u",
            "amount": 1,
            "items": [{"sku": "", "qty": 1}],
        },
        {"orderNo": "n", "userId": "u", "amount": 1, "items": []},
    ],
)
def test_order_created_refuses_bad_payloads(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        OrderCreated.model_validate(data)


def test_the_shipped_models_are_registered() -> None:
    assert model_for("OrderCreated", 1) is OrderCreated
    assert model_for("OrderPaid", 1) is OrderPaid
    assert model_for("OrderCancelled", 1) is OrderCancelled
    assert model_for("OrderPaid", 2) is None
    assert is_known_event_type("OrderPaid") is True
    assert is_known_event_type("OrderShipped") is False


def test_registering_the_same_model_again_is_harmless() -> None:
    assert event_model("OrderPaid", version=1)(OrderPaid) is OrderPaid
    assert model_for("OrderPaid", 1) is OrderPaid


def test_a_second_model_for_a_taken_slot_is_an_error() -> None:
    class Impostor(BaseModel):
        order_id: str

    with pytest.raises(ConfigurationError, match="OrderPaid v1 already has a model") as raised:
        event_model("OrderPaid", version=1)(Impostor)

    assert "schemas.order.OrderPaid" in str(raised.value)
    assert f"{__name__}.test_a_second_model_for_a_taken_slot_is_an_error.<locals>.Impostor" in str(
        raised.value
    )

    assert model_for("OrderPaid", 1) is OrderPaid
