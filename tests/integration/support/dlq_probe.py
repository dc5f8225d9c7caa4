"""Test-only consumer ``dlq-probe``: fails one user's payments until a flag file appears.

A worker imports this through ``HANDLER_MODULES=handlers,tests.integration.support.dlq_probe``
with ``CONSUMERS=dlq-probe``: the example package brings the ``user_points`` table
(its migrations), and only the probe's consumer runs.
Its effects count, with no idempotency of their own, so that an event
applied twice would show:

- ``OrderPaid`` adds ``floor(amount)`` to the user's ``user_points`` balance,
  unless the user is ``DLQ_PROBE_FAIL_USER`` and the file ``DLQ_PROBE_FIXED``
  does not exist: then it raises ``ProbeFailure`` (retryable), so the event
  goes through every retry tier to the DLT;
- ``OrderCancelled`` adds 1 to the balance of ``<user>/cancelled``.

``OrderCreated`` has no handler: the consumer takes its version and nothing else.
"""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Any

from app.db.dialect import add_to_counter
from app.registry import handler
from handlers.tables import user_points

CONSUMER = "dlq-probe"


class ProbeFailure(RuntimeError):
    """The probe's bug, "fixed" by creating the flag file."""


@handler("OrderPaid", consumer=CONSUMER)
async def add_paid_amount(event: Any, ctx: Any) -> None:
    """Add the paid amount to the user's balance, or fail for the chosen user."""
    paid = event.data
    fixed = os.environ.get("DLQ_PROBE_FIXED", "")
    if paid.user_id == os.environ.get("DLQ_PROBE_FAIL_USER") and not (
        fixed and await asyncio.to_thread(Path(fixed).exists)
    ):
        raise ProbeFailure(f"dlq-probe refuses the payment of {paid.user_id}")
    row = {"user_id": paid.user_id, "balance": math.floor(paid.amount)}
    await add_to_counter(ctx.session, user_points, "user_id", "balance", [row])


@handler("OrderCancelled", consumer=CONSUMER)
async def count_cancel(event: Any, ctx: Any) -> None:
    """Count the cancel under ``<user>/cancelled``."""
    row = {"user_id": f"{event.data.user_id}/cancelled", "balance": 1}
    await add_to_counter(ctx.session, user_points, "user_id", "balance", [row])
