"""A batch still running when a rebalance takes its partitions is given up after a grace.

faust lets a rebalance go on only once every message it delivered is acked or given
up (``Consumer.wait_empty``), and the whole group waits for that member meanwhile. A
batch is normally done within a second and is let finish: its commit then counts, and
its offsets move before the partitions change hands. A batch that is not (a statement
waiting on a database connection that went silent, a pause between attempts while the
database is down) held every member of the group for as long: in a short soak the whole
group made no progress for 60 s, a 10 s database outage included, while one worker's
batch waited on a silent connection past the outage and the rebalance then under way
waited for it.

So ``unless_revoked`` runs the batch and watches ``holds`` (``Intake.holds``: no
rebalance under way, the assignment the batch was delivered in still current). Once it
has been false for ``grace`` seconds the batch is cancelled and given up
(``BatchGivenUp``): withheld, never acked, so the partitions' next owner reads it again
from the committed offset. Whatever of it committed already stays committed and counts
once: the next owner finds its dedup records. The cancelled batch gets ``CANCEL_WAIT``
seconds to unwind; what it still does after that (rolling back on a silent connection)
cannot commit anything that would not be found the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from app.runtime.batches import BatchGivenUp

T = TypeVar("T")
LOOK_EVERY_SECONDS = 0.2
CANCEL_WAIT_SECONDS = 2.0
log = logging.getLogger("effectively_once.worker")


async def unless_revoked(
    work: Coroutine[Any, Any, T],
    holds: Callable[[], bool],
    grace: float,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``await work``; ``BatchGivenUp`` once ``holds()`` has been false for ``grace`` seconds
    while it still runs (it is cancelled first)."""
    task = asyncio.ensure_future(work)
    revoked_at: float | None = None
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=LOOK_EVERY_SECONDS)
            if done:
                return task.result()
            if holds():
                revoked_at = None
                continue
            now = clock()
            if revoked_at is None:
                revoked_at = now
            elif now - revoked_at >= grace:
                break
    except BaseException:
        task.cancel()
        raise
    if not task.cancel():  # it finished meanwhile
        return task.result()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), CANCEL_WAIT_SECONDS)
    raise BatchGivenUp(f"a rebalance took its partitions and it had not finished {grace:g}s later")
