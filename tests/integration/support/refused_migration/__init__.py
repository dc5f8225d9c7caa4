"""Test-only consumer ``refused-migration``, whose one revision the database refuses.

Its ``migrations`` folder holds a revision that creates a table of a type no database
has: a mistake in a team's own migration, which no retry gets past.
"""

from __future__ import annotations

from typing import Any

from app.registry import handler
from schemas.order import OrderPaid as OrderPaid  # registers the payload model

CONSUMER = "refused-migration"


@handler("OrderPaid", consumer=CONSUMER)
async def on_paid(event: Any, ctx: Any) -> None:
    """Does nothing: the worker never gets this far."""
