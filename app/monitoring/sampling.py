"""Run a database sample every few seconds for gauges: a periodic query, not a per-event cost.

A failing query (the database is down) keeps the gauges' last values and logs once
per outage: the pipeline's own pause already says loudly that the database is gone.
``effectively_once_sampled_timestamp_seconds{sample}`` says when a sample last
succeeded, so that a gauge's old value is not taken for a fresh one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from app import metrics

T = TypeVar("T")
log = logging.getLogger("effectively_once.monitoring")


async def keep_sampling(
    name: str, sample: Callable[[], Awaitable[T]], publish: Callable[[T], None], interval: float
) -> None:
    """``publish(await sample())`` every ``interval`` seconds until cancelled."""
    failing = False
    metrics.sampling(name)
    while True:
        try:
            async with asyncio.timeout(interval):
                value = await sample()
        except Exception as exc:
            if not failing:
                log.warning("%s sample failed (gauges keep their last values): %r", name, exc)
            failing = True
        else:
            if failing:
                log.info("%s sample works again", name)
            failing = False
            publish(value)
            metrics.sampled(name)
        await asyncio.sleep(interval)
