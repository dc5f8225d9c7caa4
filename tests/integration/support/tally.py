"""Test-only consumer ``tally``: counts how many times each event took effect.

A worker imports this through ``HANDLER_MODULES=handlers,tests.integration.support.tally``.
The example consumers are idempotent on their own (per order, per eventId),
so their tables cannot show an event applied twice. This handler is
deliberately not: each call adds 1 to a counter row keyed by the eventId,
inside the framework's transaction. Any counter above 1 means the framework
ran an event's effect twice; a missing one means it never committed it.

The counters live in ``user_points`` under ids ``tally:<eventId>`` (a table
every test database has); ``state.Database.balances`` leaves them out.
"""

from __future__ import annotations

from typing import Any

from app.db.dialect import add_to_counter
from app.registry import handler
from handlers.tables import user_points

CONSUMER = "tally"
PREFIX = "tally:"


@handler("OrderCreated", consumer=CONSUMER)
async def count_created(event: Any, ctx: Any) -> None:
    """Add 1 to the event's counter."""
    await _count(event, ctx)


@handler("OrderPaid", consumer=CONSUMER)
async def count_paid(event: Any, ctx: Any) -> None:
    """Add 1 to the event's counter."""
    await _count(event, ctx)


@handler("OrderCancelled", consumer=CONSUMER)
async def count_cancelled(event: Any, ctx: Any) -> None:
    """Add 1 to the event's counter."""
    await _count(event, ctx)


async def _count(event: Any, ctx: Any) -> None:
    row = {"user_id": f"{PREFIX}{event.event_id}", "balance": 1}
    await add_to_counter(ctx.session, user_points, "user_id", "balance", [row])
