"""``/ready`` fails when no batch has completed for ``READY_STALL_SECONDS`` while records wait.

Contract: the progress check passes while batches complete, or while nothing waits (an
idle topic is no stall), and fails once records have waited longer than the limit
without a batch completing while the lag counts records waiting; the time counts from
the last moment the worker was seen not stalled: its start, a batch that started or
completed, a check that found nothing waiting or no partition assigned (so the first
records after a quiet spell longer than the limit, or a spare's first backlog, are no
stall). Until the first batch the check says that no batch has run yet, and for how long
since the start (no made-up age of a last batch). A batch that raised does not count as
completed. Lag on a topic whose batch is sleeping until its retry records are due is a
wait intended, and does not count as records waiting.
Lag that cannot be read leaves the check passing (nothing to judge by).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from app.monitoring import readiness
from app.monitoring.progress import Progress
from app.pipeline.outcomes import Outcome
from app.records import RawRecord

LIMIT = 60.0


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def record(topic: str = "orders") -> RawRecord:
    return RawRecord(topic, 0, 7, b"o-1", b"{}", timestamp_ms=1_000)


async def nothing(records: Sequence[RawRecord]) -> list[Outcome]:
    return []


async def broken(records: Sequence[RawRecord]) -> list[Outcome]:
    raise RuntimeError("bug")


def check(progress: Progress, lag: dict[tuple[str, int], int] | None) -> readiness.Check:
    waiting = None if lag is None else progress.records_waiting(lag)
    return readiness.progress(
        waiting, progress.stalled_for(), progress.since_last_batch(), LIMIT, progress.completed_any
    )


def test_records_waiting_with_no_batch_since_the_start_for_too_long_is_a_stall() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)

    clock.now += LIMIT - 1
    assert check(progress, {("orders", 0): 5}).ok
    clock.now += 2
    stalled = check(progress, {("orders", 0): 5})

    assert not stalled.ok
    assert stalled.name == "progress"
    assert "5 record(s) wait" in stalled.detail


async def test_a_completed_batch_starts_the_count_again() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    clock.now += LIMIT + 30

    await progress.run(nothing, [record()])
    clock.now += LIMIT - 1

    assert check(progress, {("orders", 0): 5}).ok


async def test_before_the_first_batch_the_check_says_none_has_run_since_the_start() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    clock.now += 24

    quiet = check(progress, {("orders", 0): 0})
    assert quiet.ok
    assert quiet.detail == "no batch yet in the 24s since the start, 0 record(s) waiting"
    clock.now += LIMIT + 1  # counted from the check that found nothing waiting
    stalled = check(progress, {("orders", 0): 5})
    assert stalled.detail == "no batch yet in the 85s since the start while 5 record(s) wait"

    await progress.run(nothing, [record()])
    clock.now += 3
    assert check(progress, {("orders", 0): 0}).detail == "last batch 3s ago, 0 record(s) waiting"


async def test_the_first_records_after_a_quiet_spell_are_no_stall() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    await progress.run(nothing, [record()])
    for _ in range(5):  # probed every 30 s, nothing waiting, no batch for 150 s
        clock.now += 30
        assert check(progress, {("orders", 0): 0}).ok

    clock.now += 2  # records arrived; their batch has not completed yet
    fresh = check(progress, {("orders", 0): 5})
    assert fresh.ok, fresh.detail
    assert fresh.detail == "last batch 152s ago, 5 record(s) waiting"
    clock.now += LIMIT - 3  # counted from the last check that found nothing waiting
    assert check(progress, {("orders", 0): 5}).ok
    clock.now += 2
    stalled = check(progress, {("orders", 0): 5})
    assert not stalled.ok
    assert stalled.detail == (
        "no batch completed for 211s while 5 record(s) wait "
        "(61s since a batch started or nothing waited)"
    )


def test_a_spare_given_a_backlog_counts_from_when_it_had_no_partitions() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    for _ in range(20):  # a spare replica, asked every 30 s: no partitions, no batch
        clock.now += 30
        progress.unassigned()

    clock.now += 5  # another replica died: its partitions and their backlog are here
    assert check(progress, {("orders", 0): 500}).ok
    clock.now += LIMIT
    assert not check(progress, {("orders", 0): 500}).ok


async def test_a_batch_that_hangs_counts_from_its_start() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    await progress.run(nothing, [record()])
    clock.now += 10 * LIMIT  # quiet, and nobody asked
    hold = asyncio.Event()

    async def hangs(records: Sequence[RawRecord]) -> list[Outcome]:
        await hold.wait()
        return []

    batch = asyncio.ensure_future(progress.run(hangs, [record()]))
    await asyncio.sleep(0)  # the batch starts
    clock.now += 1
    assert check(progress, {("orders", 0): 1}).ok
    clock.now += LIMIT
    assert not check(progress, {("orders", 0): 1}).ok
    hold.set()
    await batch
    assert check(progress, {("orders", 0): 1}).ok


async def test_a_batch_that_raised_is_not_progress() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    clock.now += LIMIT + 1

    with pytest.raises(RuntimeError):
        await progress.run(broken, [record()])
    clock.now += LIMIT + 1  # counted from when it started

    assert not progress.completed_any
    assert not check(progress, {("orders", 0): 1}).ok


def test_nothing_waiting_is_no_stall_however_long_it_is_quiet() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    clock.now += 10 * LIMIT

    assert check(progress, {("orders", 0): 0, ("orders", 1): 0}).ok
    assert check(progress, {}).ok


def test_a_retry_tier_sleeping_until_its_records_are_due_is_no_stall() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    clock.now += 10 * LIMIT
    lag = {("orders.retry.5m", 0): 3, ("orders", 0): 0}

    with progress.waiting_until_due("orders.retry.5m"):
        assert check(progress, lag).ok
        clock.now += 10 * LIMIT
        assert check(progress, lag).ok
    clock.now += LIMIT + 1  # due, and no batch ran: its lag counts
    assert not check(progress, lag).ok


def test_lag_that_cannot_be_read_judges_nothing() -> None:
    clock = Clock()
    progress = Progress(monotonic=clock)
    clock.now += 10 * LIMIT

    assert check(progress, None).ok
