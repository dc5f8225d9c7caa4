"""A batch still running when a rebalance takes its partitions is given up after a grace.

Contract (``app.runtime.revoked.unless_revoked``): while the batch's events are held it
runs as long as it takes; one that finishes within the grace after its partitions were
revoked keeps its result (its commit counts, its offsets move); one still running once
the grace is over is cancelled and ``BatchGivenUp`` raised, so that faust's rebalance,
which waits for every delivered message, goes on. A revocation that ends (the events held
again) restarts the grace. Before, a batch waiting on a silent database connection held
the whole group's rebalance until its statement's deadline ran out.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from app.runtime.batches import BatchGivenUp
from app.runtime.revoked import unless_revoked

GRACE = 0.5


class Ownership:
    """``holds()`` flips to False once ``revoke()`` is called."""

    def __init__(self) -> None:
        self.held = True

    def holds(self) -> bool:
        return self.held


async def test_a_batch_that_finishes_while_held_returns_its_result() -> None:
    async def work() -> str:
        await asyncio.sleep(0.3)
        return "committed"

    assert await unless_revoked(work(), Ownership().holds, GRACE) == "committed"


async def test_a_batch_still_running_after_the_grace_is_cancelled_and_given_up() -> None:
    ownership = Ownership()
    cancelled = asyncio.Event()

    async def stuck() -> None:
        try:
            await asyncio.sleep(60)  # a statement on a silent connection
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def revoke_soon() -> None:
        await asyncio.sleep(0.2)
        ownership.held = False

    started = time.monotonic()
    revoker = asyncio.ensure_future(revoke_soon())
    with pytest.raises(BatchGivenUp, match="rebalance"):
        await unless_revoked(stuck(), ownership.holds, GRACE)
    await revoker
    assert cancelled.is_set()
    assert time.monotonic() - started < 0.2 + GRACE + 1.0


async def test_a_batch_that_finishes_within_the_grace_keeps_its_result() -> None:
    ownership = Ownership()

    async def work() -> str:
        await asyncio.sleep(0.1)
        ownership.held = False  # the rebalance starts while it commits
        await asyncio.sleep(GRACE / 3)
        return "committed"

    assert await unless_revoked(work(), ownership.holds, GRACE) == "committed"


async def test_holding_again_restarts_the_grace() -> None:
    ownership = Ownership()

    async def flapping() -> str:
        for _ in range(3):  # revoked for less than the grace each time
            ownership.held = False
            await asyncio.sleep(GRACE * 0.6)
            ownership.held = True
            await asyncio.sleep(0.25)
        return "committed"

    assert await unless_revoked(flapping(), ownership.holds, GRACE) == "committed"


async def test_the_batchs_own_error_is_raised() -> None:
    async def failing() -> None:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        await unless_revoked(failing(), Ownership().holds, GRACE)
