"""A dependency that answers again ends the pauses that wait for it.

Contract: a batch paused on an infrastructure failure, sleeping a back-off of 30 s, tries
again as soon as the worker's watch finds the dependency answering again (the watch's
``once`` after a failed one), not at the end of its back-off; its result is the
operation's. A watch that finds the dependency answering without having found it down
wakes no pause (before, a batch slept its whole back-off, each consumer's on its own:
23 s after the database came back in a review, with ``/ready`` green).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import OperationalError

from app.monitoring.readiness import Check
from app.monitoring.watch import Watch
from app.pipeline.pause import Backoff, retry_in_place

LONG = Backoff(initial=30.0, maximum=30.0, jitter=0.0)


def _flaky() -> tuple[list[int], Callable[[], Awaitable[str]]]:
    calls: list[int] = []

    async def operation() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("SELECT 1", {}, ConnectionRefusedError("database down"))
        return "applied"

    return calls, operation


async def test_a_pause_ends_once_the_watch_finds_the_database_answering() -> None:
    answers = [False, True]

    async def check() -> Check:
        return Check("database", answers.pop(0), "SELECT 1")

    watch = Watch("database", check)
    calls, operation = _flaky()
    started = time.monotonic()
    paused = asyncio.ensure_future(retry_in_place("batch", operation, LONG, holds=lambda: True))
    await asyncio.sleep(0.1)
    await watch.once()  # down
    await asyncio.sleep(0.3)
    assert not paused.done()  # a watch that finds it down wakes nothing
    await watch.once()  # answers again

    async with asyncio.timeout(3):
        assert await paused == "applied"
    assert len(calls) == 2
    assert time.monotonic() - started < 3


async def test_a_watch_that_never_found_it_down_wakes_no_pause() -> None:
    async def check() -> Check:
        return Check("database", True, "SELECT 1")

    watch = Watch("database", check)
    calls, operation = _flaky()
    paused = asyncio.ensure_future(retry_in_place("batch", operation, LONG, holds=lambda: True))
    await asyncio.sleep(0.1)
    await watch.once()
    await asyncio.sleep(0.6)

    assert not paused.done() and len(calls) == 1
    paused.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await paused
