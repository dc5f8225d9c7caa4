"""An attempt still running once its batch is no longer the worker's is cut short.

Contract (``pause.retry_in_place(..., holds=)``): while an attempt runs, ``holds()`` is
asked every ``CHECK_EVERY_SECONDS``; once it has been false for ``CUT_AFTER_SECONDS``
(a rebalance, or the worker stopping) the attempt is cancelled and ``BatchGivenUp``
raised, without waiting for the attempt to wind down: one waiting on a connection gone
silent would otherwise hold the stop for the driver's deadlines (45 s by default). An
attempt that ends within the grace returns its result as before, and without ``holds``
nothing is ever cut.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from app.errors import BatchGivenUp
from app.pipeline import pause
from app.pipeline.pause import Backoff, retry_in_place

NO_PAUSE = Backoff(initial=0.01, maximum=0.01, jitter=0.0)
CUT_AFTER = 0.3


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pause, "CUT_AFTER_SECONDS", CUT_AFTER)
    monkeypatch.setattr(pause, "CHECK_EVERY_SECONDS", 0.05)


class Silent:
    """An attempt that waits until ``release`` (a query on a silent connection); its
    wind-down after the cancellation waits for it too (the rollback on that connection)."""

    def __init__(self) -> None:
        self.cancelled = False
        self.release = asyncio.Event()

    async def __call__(self) -> str:
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            await asyncio.shield(self.release.wait())
            raise
        return "answered"


def lost_after(seconds: float) -> pause.Holds:
    until = time.monotonic() + seconds
    return lambda: time.monotonic() < until


async def test_a_silent_attempt_is_cancelled_and_given_up_once_the_batch_is_lost() -> None:
    attempt = Silent()
    started = time.monotonic()
    running = asyncio.ensure_future(
        retry_in_place("batch", attempt, NO_PAUSE, holds=lost_after(0.2))
    )
    await asyncio.wait({running}, timeout=5)
    took = time.monotonic() - started
    attempt.release.set()  # the silent connection's deadline, at last
    assert running.done(), "the attempt held its batch after the batch was lost"
    with pytest.raises(BatchGivenUp, match="cut short"):
        running.result()
    assert 0.2 + CUT_AFTER <= took < 0.2 + CUT_AFTER + 0.5
    assert attempt.cancelled


async def test_an_attempt_ending_within_the_grace_returns_its_result() -> None:
    async def slow() -> str:
        await asyncio.sleep(0.3)
        return "committed"

    assert await retry_in_place("batch", slow, NO_PAUSE, holds=lost_after(0.1)) == "committed"


async def test_while_the_batch_is_held_a_long_attempt_runs_to_its_end() -> None:
    async def long() -> str:
        await asyncio.sleep(CUT_AFTER * 3)
        return "committed"

    assert await retry_in_place("batch", long, NO_PAUSE, holds=lambda: True) == "committed"


async def test_without_holds_nothing_is_cut() -> None:
    async def long() -> str:
        await asyncio.sleep(CUT_AFTER * 2)
        return "committed"

    assert await retry_in_place("batch", long, NO_PAUSE) == "committed"


async def test_a_cancelled_caller_cancels_its_attempt_and_does_not_wait_for_it() -> None:
    attempt = Silent()
    caller = asyncio.ensure_future(retry_in_place("batch", attempt, NO_PAUSE, holds=lambda: True))
    await asyncio.sleep(0.1)
    caller.cancel()
    await asyncio.wait({caller}, timeout=2)
    attempt.release.set()
    assert caller.cancelled(), "the cancelled caller waited for its attempt's wind-down"
    await asyncio.sleep(0)
    assert attempt.cancelled
