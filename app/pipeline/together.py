"""Running a batch's consumers together, and finishing what a commit started.

``all_or_none`` runs the consumers of a batch concurrently with
``asyncio.TaskGroup``'s semantics: when one fails, the others are cancelled
and waited for before its error is raised (``asyncio.gather`` left them
running, to be cut off wherever the worker's shutdown found them).

``to_the_end`` protects what follows a consumer's commit: the commit is
durable, so its retry and dead-letter records, its after-commit callbacks and
the prefilter's note run to their end even when the batch is cancelled (a
sibling failed, the worker stops), within ``grace`` seconds. Past that (a
broker that stays down), the work is cancelled after all: the batch was not
acked, and its next run finds the committed events as duplicates and routes
the failed ones again.

``unless_cut`` is the other way round: it gives up on ``work`` once ``cut()`` says so
(the batch is no longer the worker's, the relay is stopping) and cancels it without
waiting for its wind-down, which on a connection gone silent ends only at the driver's
deadlines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def all_or_none(runs: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``runs`` concurrently and return their results in order; if one raises, cancel
    the others, wait for them, and raise its error (the first to fail)."""
    if len(runs) < 2:  # nothing to cancel: no task needed
        return [await run for run in runs]
    tasks = [asyncio.ensure_future(run) for run in runs]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:  # one failed, or this was cancelled: stop the others and wait for them
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return [task.result() for task in tasks]


async def to_the_end(work: Awaitable[T], grace: float) -> T:
    """Await ``work``; if cancelled meanwhile, let ``work`` finish (``grace`` seconds at
    most) before the cancellation goes on."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        try:
            await asyncio.wait({task}, timeout=grace)
        finally:
            task.cancel()
        raise


class CutShort(Exception):
    """``unless_cut`` gave up on its work."""


async def unless_cut(work: Awaitable[T], cut: Callable[[], bool], every: float) -> T:
    """Await ``work``, asking ``cut()`` every ``every`` seconds while it runs; once true,
    cancel ``work`` without waiting for it (``abandon``) and raise ``CutShort``. A
    cancellation of the caller cancels ``work`` the same way."""
    running = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({running}, timeout=every)
            if done:
                return running.result()
            if cut():
                break
    except BaseException:
        abandon(running)
        raise
    abandon(running)
    raise CutShort


def abandon(running: asyncio.Future[Any]) -> None:
    """Cancel ``running`` and leave it to end on its own; its outcome is read when it does,
    so that asyncio does not log it as never retrieved."""
    running.cancel()
    running.add_done_callback(lambda ended: ended.cancelled() or ended.exception())
