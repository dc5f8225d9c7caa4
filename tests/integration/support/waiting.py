"""Polling with a deadline that fails early, with the log, when a worker has died, or
when a test's own ``stuck`` check says waiting longer is pointless."""

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
    stuck: Callable[[], str | None] | None = None,
) -> T:
    """Poll ``probe`` until ``done(value)``; return that value.

    A probe that raises (a table the worker has not created yet) counts as not
    done. Raises ``AssertionError`` naming ``what``, the last value seen and
    each worker's log tail after ``within`` seconds, as soon as a watched worker exits,
    or as soon as ``stuck()`` gives a reason (then that reason).
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
        hopeless = stuck() if stuck is not None else None
        if dead or hopeless or time.monotonic() > deadline:
            why = "a worker exited" if dead else hopeless or f"not within {within}s"
            states = "\n".join(worker.describe() for worker in watched)
            raise AssertionError(f"{what}: {why}; last seen {last!r}\n{states}")
        await asyncio.sleep(POLL_SECONDS)


RERUN_LINE = "running the batch again"
MAX_RERUNS = 20


def rerunning_forever(
    workers: Iterable[WorkerProcess], limit: int = MAX_RERUNS
) -> Callable[[], str | None]:
    """A ``stuck`` check for tests whose worker races nobody: a batch rolled back and run
    again more than ``limit`` times (the worker logs each) never commits. A duplicate that
    got past the dedup check does that: its dedup record collides with the one written
    before, which the batch takes for a race it lost, and runs again."""
    watched = list(workers)

    def check() -> str | None:
        for worker in watched:
            reruns = [line for line in worker.log().splitlines() if RERUN_LINE in line]
            if len(reruns) > limit:
                return (
                    f"worker {worker.name} ran a batch again {len(reruns)} times with no other "
                    "worker to race (a duplicate past the dedup check collides with its own "
                    f"dedup record on every run); last: {reruns[-1].strip()}"
                )
        return None

    return check


async def path_appears(path: Path, *, within: float, workers: Iterable[WorkerProcess] = ()) -> None:
    """Wait until ``path`` exists (a marker a test-only handler writes)."""

    async def exists() -> bool:
        return await asyncio.to_thread(path.exists)

    await eventually(exists, bool, what=f"{path.name} to appear", within=within, workers=workers)


async def split_between(
    topic: str, partitions: int, one: WorkerProcess, two: WorkerProcess, *, within: float = 60
) -> tuple[set[int], set[int]]:
    """Wait until the two workers' last logged assignments of ``topic`` are disjoint,
    non-empty and cover its partitions; return them.

    Disjoint as well as covering: until the first member logs the second generation,
    its last assignment is still every partition, overlapping the newcomer's.
    """
    everything = set(range(partitions))

    async def assignments() -> tuple[set[int], set[int]]:
        return one.assigned_partitions(topic) or set(), two.assigned_partitions(topic) or set()

    def split(pair: tuple[set[int], set[int]]) -> bool:
        a, b = pair
        return bool(a) and bool(b) and not a & b and a | b == everything

    return await eventually(
        assignments,
        split,
        what=f"{one.name} and {two.name} to split {topic}",
        within=within,
        workers=[one, two],
    )
