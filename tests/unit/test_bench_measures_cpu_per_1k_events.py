"""The bench's CPU figures: what a process and the database's backends spent in a window.

Contract: ``CpuMeter`` reports the CPU time the measured process spent between ``open``
and ``close`` (not before), and for the backends: each one's time since ``open``, a
backend that connected meanwhile from its start, one gone by the close nothing (never
a negative share). ``Spent.per_1k_ms`` scales seconds to milliseconds per 1,000
events.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any, cast

import pytest

from bench.cpu import CpuMeter, Spent, cpu_seconds
from bench.database import BenchDatabase

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")

BURN_SECONDS = 0.3


def burn(seconds: float) -> None:
    """Spend about ``seconds`` of this process's CPU."""
    until = time.process_time() + seconds
    while time.process_time() < until:
        pass


class Backends:
    """Stands in for ``BenchDatabase``: the backends' pids it lists, changed at will."""

    name = "bench"

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    async def fetch(self, _query: str, *_args: Any) -> list[tuple[int]]:
        return [(pid,) for pid in self.pids]


def spinner() -> subprocess.Popen[bytes]:
    """A process that spends CPU until killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def test_cpu_seconds_grow_with_work_and_are_zero_for_a_process_that_is_gone() -> None:
    before = cpu_seconds(os.getpid())
    burn(BURN_SECONDS)
    assert cpu_seconds(os.getpid()) - before >= BURN_SECONDS * 0.8
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu_seconds(gone.pid) == 0.0


async def test_the_meter_counts_only_the_window() -> None:
    burn(BURN_SECONDS)  # before the window: not counted
    meter = CpuMeter(os.getpid(), cast(BenchDatabase, Backends([])))
    await meter.open()
    burn(BURN_SECONDS)
    spent = await meter.close()
    assert BURN_SECONDS * 0.8 <= spent.process < BURN_SECONDS * 1.8
    assert spent.database == 0.0


async def test_backends_count_from_the_open_or_their_start_and_a_gone_one_counts_nothing() -> None:
    early, late, leaving = spinner(), None, spinner()
    try:
        await asyncio.sleep(0.5)  # both spend CPU before the window opens
        database = Backends([early.pid, leaving.pid])
        meter = CpuMeter(os.getpid(), cast(BenchDatabase, database))
        await meter.open()
        leaving.kill()
        leaving.wait()
        late = spinner()
        database.pids = [early.pid, late.pid]
        # Half a second of CPU each, however busy the machine (both share its cores).
        for _ in range(100):
            await asyncio.sleep(0.1)
            if (
                min(cpu_seconds(late.pid), cpu_seconds(early.pid) - meter._backends[early.pid])
                > 0.5
            ):
                break
        early_in_window = cpu_seconds(early.pid) - meter._backends[early.pid]
        spent = await meter.close()
        late_total = cpu_seconds(late.pid)
        # early: its window's share only; late: all of it; leaving: nothing, not minus.
        assert early_in_window > 0.1
        assert spent.database >= early_in_window + late_total * 0.8 - 0.05
        assert spent.database < cpu_seconds(early.pid) + late_total + 0.05
    finally:
        for process in (early, late, leaving):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


def test_per_1k_ms_scales_seconds_to_milliseconds_per_1000_events() -> None:
    assert Spent(2.0, 0.5).per_1k_ms(4_000) == (500.0, 125.0)
