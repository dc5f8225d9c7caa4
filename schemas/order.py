"""Payload models of the Order aggregate.

Ids are ``schemas.ids`` ids (a JSON string or integer); order and user ids are
as long as the example tables' columns (``handlers.tables.ID``), skus as
``SKU``. Amounts are a JSON number or a numeric string (``199.00``, ``"199.00"``),
read as ``Decimal``; a unit inside the text (``"199.00 CNY"``) is invalid.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from schemas.ids import Id, IdField
from schemas.registry import event_model

OrderId = Annotated[str, IdField(max_length=128)]
UserId = Annotated[str, IdField(max_length=128)]
Sku = Annotated[str, IdField(max_length=64)]


class _Payload(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class OrderItem(_Payload):
    """One line of an order."""

    sku: Sku
    qty: int = Field(ge=1)


@event_model("OrderCreated", version=1)
class OrderCreated(_Payload):
    """An order was placed; its items (if it names any) are to be reserved."""

    order_id: OrderId
    order_no: Id
    user_id: UserId
    amount: Decimal = Field(ge=0)
    items: list[OrderItem] = Field(default_factory=list)


@event_model("OrderPaid", version=1)
class OrderPaid(_Payload):
    """An order was paid."""

    order_id: OrderId
    user_id: UserId
    amount: Decimal = Field(ge=0)
    paid_at: datetime


@event_model("OrderCancelled", version=1)
class OrderCancelled(_Payload):
    """An order was cancelled; its reservation and points are to be given back."""

    order_id: OrderId
    user_id: UserId
    reason: str | None = None
