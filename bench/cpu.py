"""CPU time a row costs: of one process (a worker, a relay) and of the PostgreSQL backends
connected to the bench's database, over the row's window (``/proc/<pid>/stat``).

Events/s say how fast; these say where the work went, the worker's side or the
database's. On a shared machine both move with the hour; the split between the two
sides moves less.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.database import BenchDatabase

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def backends(database: BenchDatabase) -> list[int]:
    """The PostgreSQL backends connected to the bench's database, the bench's own excepted."""
    rows = await database.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        database.name,
    )
    return [int(row[0]) for row in rows]


@dataclass(frozen=True)
class Spent:
    """CPU seconds of the measured process and of its database backends over a window."""

    process: float
    database: float

    def per_1k_ms(self, events: int) -> tuple[float, float]:
        """``(process, database)`` in milliseconds per 1,000 of ``events``."""
        scale = 1_000_000 / max(events, 1)
        return self.process * scale, self.database * scale


@dataclass
class CpuMeter:
    """``open`` when the window opens, ``close`` when it closes: what ``pid`` and the
    database's backends spent in between. A backend that connects meanwhile counts from
    its start; one that is gone by the close counts nothing (a worker's pool keeps its)."""

    pid: int
    database: BenchDatabase
    _process: float = 0.0
    _backends: dict[int, float] = field(default_factory=dict)

    async def open(self) -> None:
        """Read where both stand now."""
        self._process = cpu_seconds(self.pid)
        self._backends = {pid: cpu_seconds(pid) for pid in await backends(self.database)}

    async def close(self) -> Spent:
        """What both spent since ``open``."""
        process = cpu_seconds(self.pid) - self._process
        pids = set(self._backends) | set(await backends(self.database))
        database = sum(max(cpu_seconds(pid) - self._backends.get(pid, 0.0), 0.0) for pid in pids)
        return Spent(process, database)
