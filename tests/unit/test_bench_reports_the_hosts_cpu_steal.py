"""The bench reports how much CPU time the host gave to other guests during a row.

Contract: ``cpu_times`` reads the machine's ``cpu`` line of ``/proc/stat``
(steal is its eighth counter; guest time, already inside user time, is not
added twice); ``steal_percent`` is the stolen share of the ticks between two
readings. Without the counters (not Linux, an unreadable file) both say
``None`` instead of failing the bench.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.steal import CpuTimes, cpu_times, steal_percent

STAT = """cpu  100 5 50 800 10 0 5 30 7 0
cpu0 50 2 25 400 5 0 3 15 3 0
intr 12345
"""


def test_the_counters_are_read_from_the_machine_wide_line(tmp_path: Path) -> None:
    source = tmp_path / "stat"
    source.write_text(STAT, encoding="ascii")

    assert cpu_times(source) == CpuTimes(steal=30, total=1000)


def test_the_stolen_share_is_that_of_the_ticks_between_two_readings() -> None:
    before, after = CpuTimes(steal=30, total=1000), CpuTimes(steal=80, total=1200)

    assert steal_percent(before, after) == pytest.approx(25.0)
    assert steal_percent(before, before) is None
    assert steal_percent(None, after) is None


def test_no_counters_means_no_figure(tmp_path: Path) -> None:
    assert cpu_times(tmp_path / "missing") is None
    odd = tmp_path / "stat"
    odd.write_text("intr 1 2 3\n", encoding="ascii")
    assert cpu_times(odd) is None


def test_this_machine_publishes_them_when_it_is_linux() -> None:
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat: not Linux")
    now = cpu_times()
    assert now is not None and now.total > 0 and 0 <= now.steal <= now.total
