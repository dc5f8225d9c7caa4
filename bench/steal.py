"""How much of the machine's CPU time the hypervisor gave to other guests (``steal``).

On a shared virtual machine a slow spell on the host looks like a slow worker.
The bench reads the kernel's CPU counters (``/proc/stat``) when a row's worker
starts and when its window closes, and reports the stolen share of that time
next to the row, so that a reader can tell the two apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

PROC_STAT = Path("/proc/stat")


class CpuTimes(NamedTuple):
    """The machine's CPU time so far, in clock ticks: stolen and in all."""

    steal: int
    total: int


def cpu_times(source: Path = PROC_STAT) -> CpuTimes | None:
    """The counters now; ``None`` where the kernel does not publish them (not Linux)."""
    try:
        first = source.read_text(encoding="ascii").splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[:1] != ["cpu"] or len(first) < 9:
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user, nice]
    ticks = [int(value) for value in first[1:9]]
    return CpuTimes(steal=ticks[7], total=sum(ticks))


def steal_percent(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """The stolen share of the CPU time between two readings, in percent."""
    if before is None or after is None or after.total <= before.total:
        return None
    return 100.0 * (after.steal - before.steal) / (after.total - before.total)
