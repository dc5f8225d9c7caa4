"""Test-only consumer ``slow-probe``: stalls inside its batch transaction on one chosen event.

A worker imports this through ``HANDLER_MODULES=handlers,tests.integration.support.slow_probe``.
When the handler meets the ``OrderPaid`` whose eventId is ``SLOW_PROBE_EVENT_ID``
it creates the file ``SLOW_PROBE_MARKER`` (holding the worker's pid) and sleeps,
so the transaction stays open until the test kills the worker. A later delivery
of the same event finds the marker and goes through: the redelivery after the
crash completes. Without the two variables the handler does nothing.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import schemas.order  # noqa: F401  (the example's models: OrderPaid, which this probe handles)
from app.registry import handler

CONSUMER = "slow-probe"
STALL_SECONDS = 600


@handler("OrderPaid", consumer=CONSUMER)
async def stall_on_trigger(event: Any, ctx: Any) -> None:
    """Stall on the first delivery of the trigger event; do nothing for any other."""
    trigger = os.environ.get("SLOW_PROBE_EVENT_ID")
    marker = os.environ.get("SLOW_PROBE_MARKER")
    if not trigger or not marker or event.event_id != trigger:
        return
    path = Path(marker)
    if await asyncio.to_thread(path.exists):
        return
    await asyncio.to_thread(_create_atomically, path, str(os.getpid()))
    await asyncio.sleep(STALL_SECONDS)


def _create_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader never sees the file half written."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    os.replace(partial, path)
