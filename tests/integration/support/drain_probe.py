"""Test-only consumer ``drain-probe``: fails one chosen event, on a signal, until told it is fixed.

A worker imports this through ``HANDLER_MODULES=tests.integration.support.drain_probe``.
Its ``OrderPaid`` handler counts every event it applies under ``tally:<eventId>`` in
``user_points`` (an event applied twice would show as 2). On the event whose eventId
is ``DRAIN_PROBE_EVENT_ID`` it instead creates ``DRAIN_PROBE_MARKER`` (so the test
knows the handler is running), waits until ``DRAIN_PROBE_GO`` exists, and raises,
unless ``DRAIN_PROBE_FIXED`` exists: then it counts the event like any other.
The module does not import ``handlers``; it names the ``user_points`` table itself.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from app.db.dialect import add_to_counter
from app.registry import handler
from handlers.tables import user_points

CONSUMER = "drain-probe"
PREFIX = "tally:"


class ProbeFailure(RuntimeError):
    """The failure the test asked for."""


def _exists(variable: str) -> bool:
    path = os.environ.get(variable)
    return bool(path) and Path(path).exists()


def _wait_for(variable: str) -> None:
    while not _exists(variable):
        time.sleep(0.05)


@handler("OrderPaid", consumer=CONSUMER)
async def count_or_fail(event: Any, ctx: Any) -> None:
    """Count the event, or fail the chosen one once the test says go."""
    if event.event_id == os.environ.get("DRAIN_PROBE_EVENT_ID") and not await asyncio.to_thread(
        _exists, "DRAIN_PROBE_FIXED"
    ):
        marker = Path(os.environ["DRAIN_PROBE_MARKER"])
        await asyncio.to_thread(marker.write_text, str(os.getpid()))
        await asyncio.to_thread(_wait_for, "DRAIN_PROBE_GO")
        raise ProbeFailure(f"drain-probe fails {event.event_id}")
    row = {"user_id": f"{PREFIX}{event.event_id}", "balance": 1}
    await add_to_counter(ctx.session, user_points, "user_id", "balance", [row])
