"""The worker's Kafka consumer closes within a bound, however its broker is doing.

faust stops its consumer thread by stopping aiokafka's consumer on it and then telling
the worker the thread stopped; the worker waits 60 s for that word. aiokafka 0.14's
fetcher, closing, cancels each of its pending tasks and awaits it, so that the
cancellation of a task it cancelled (a retry that waits out a back-off, as with the
broker down) escapes its ``close``: the thread ended on it with a traceback before it
said it stopped, and a worker stopped with SIGTERM while its broker was down took 62 s
to exit (an orchestrator kills it at 30). ``close_within`` takes such an escaped
cancellation for the end of the close, and gives the close ``CLOSE_SECONDS`` at most.
Nothing is committed on the way: a batch's offsets are committed as it is acked.

Before the close, faust waits for the batches in hand to be acked and commits their
offsets (``Consumer.wait_empty``; at a rebalance's revocation too). With the broker
silent (no FIN, no RST) that commit never ends: a worker sent SIGTERM waited for the
broker's return, minutes. When the worker stops, ``wait_empty_within`` gives it
``WAIT_EMPTY_SECONDS`` (a revocation still waits for its batches); offsets it did not
commit are read again by the partitions' next owner, which finds their events applied.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

CLOSE_SECONDS = 10.0
WAIT_EMPTY_SECONDS = 5.0
log = logging.getLogger("effectively_once.worker")


async def close_within(close: Callable[[], Awaitable[None]], within: float = CLOSE_SECONDS) -> None:
    """Run ``close`` (the consumer's ``stop``) for ``within`` seconds at most; a cancellation
    it raises that was not this task's own ends it too."""
    task = asyncio.current_task()
    try:
        async with asyncio.timeout(within):
            await close()
    except asyncio.CancelledError:
        if task is not None and task.cancelling():
            raise  # the close itself was cancelled: not ours to swallow
        log.info("the Kafka consumer's close ended early (its broker did not answer)")
    except TimeoutError:
        log.warning("the Kafka consumer did not close within %.0f s: left as it is", within)


async def wait_empty_within(
    wait_empty: Callable[[], Awaitable[None]], within: float = WAIT_EMPTY_SECONDS
) -> None:
    """Run ``wait_empty`` (faust's wait for the batches in hand, then its commit) for
    ``within`` seconds at most."""
    try:
        async with asyncio.timeout(within):
            await wait_empty()
    except TimeoutError:
        log.warning(
            "the batches in hand were not acked and committed within %.0f s (the broker does "
            "not answer?): going on without; the partitions' next owner reads those records "
            "again and finds their events applied",
            within,
        )
