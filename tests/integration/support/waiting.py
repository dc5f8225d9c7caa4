"""Polling with a deadline that fails early, with the log, when a worker has died."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

from tests.integration.support.workers import WorkerProcess

T = TypeVar("T")

POLL_SECONDS = 0.2


async def eventually(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    *,
    what: str,
    within: float,
    workers: Iterable[WorkerProcess] = (),
) -> T:
    """Poll ``probe`` until ``done(value)``; return that value.

    A probe that raises (a table the worker has not created yet) counts as not
    done. Raises ``AssertionError`` naming ``what``, the last value seen and
    each worker's log tail after ``within`` seconds, or as soon as a watched worker exits.
    """
    watched = list(workers)
    deadline = time.monotonic() + within
    last: object = "(no value yet)"
    while True:
        try:
            value = await probe()
        except Exception as exc:  # "not ready yet" is an exception too
            last = f"{type(exc).__name__}: {exc}"
        else:
            if done(value):
                return value
            last = value
        dead = [worker for worker in watched if not worker.alive]
        if dead or time.monotonic() > deadline:
            why = "a worker exited" if dead else f"not within {within}s"
            states = "\n".join(worker.describe() for worker in watched)
            raise AssertionError(f"{what}: {why}; last seen {last!r}\n{states}")
        await asyncio.sleep(POLL_SECONDS)


async def path_appears(
    path: Path, *, within: float, workers: Iterable[WorkerProcess] = ()
) -> None:
    """Wait until ``path`` exists (a marker a test-only handler writes)."""

    async def exists() -> bool:
        return await asyncio.to_thread(path.exists)

    await eventually(exists, bool, what=f"{path.name} to appear", within=within, workers=workers)
