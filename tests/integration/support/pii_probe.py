"""Test-only consumer ``pii-probe``: a handler whose statement breaks a unique key with
personal data in its bound parameters.

A worker imports this through ``HANDLER_MODULES=handlers,tests.integration.support.pii_probe``
with ``CONSUMERS=pii-probe`` (the example package brings the ``user_points`` table). Every
``OrderPaid`` inserts the customer's ``user_points`` row twice: the second insert breaks
the primary key, with ``EMAIL`` and ``CARD`` as the statement's parameters. Neither comes
from the event, so any copy of them in a failure record came from the exception.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from app.registry import handler

CONSUMER = "pii-probe"
MODULES = "handlers,tests.integration.support.pii_probe"
EMAIL = "jane.doe@example.com"
CARD = "4111111111111111"

_INSERT = text("INSERT INTO user_points (user_id, balance) VALUES (:user_id, :balance)")


@handler("OrderPaid", consumer=CONSUMER)
async def store_the_customer_twice(event: Any, ctx: Any) -> None:
    """Insert the customer's row twice; the second insert breaks the key."""
    customer = {"user_id": EMAIL, "balance": int(CARD)}
    await ctx.session.execute(_INSERT, customer)
    await ctx.session.execute(_INSERT, customer)
