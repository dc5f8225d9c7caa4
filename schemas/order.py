"""Payload models of the Order aggregate."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from schemas.registry import event_model


class _Payload(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class OrderItem(_Payload):
    """One line of an order."""

    sku: str = Field(min_length=1, max_length=64)
    qty: int = Field(ge=1)


@event_model("OrderCreated", version=1)
class OrderCreated(_Payload):
    """An order was placed; its items are to be reserved."""

    order_id: str
    order_no: str
    user_id: str
    amount: Decimal = Field(ge=0)
    items: list[OrderItem]


@event_model("OrderPaid", version=1)
class OrderPaid(_Payload):
    """An order was paid."""

    order_id: str
    user_id: str
    amount: Decimal = Field(ge=0)
    paid_at: datetime


@event_model("OrderCancelled", version=1)
class OrderCancelled(_Payload):
    """An order was cancelled; its reservation and points are to be given back."""

    order_id: str
    user_id: str
    reason: str | None = None
