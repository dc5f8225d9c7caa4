"""``python -m bench.summary RESULTS.json...``: several runs' results side by side.

Each file is one ``python -m bench --json-out`` run. Prints, as Markdown, one row per
scenario with each run's figure (events/s and the ratio to that run's bare agent; p99,
and the CPU per 1,000 events of the worker and of the database, in tables of their own)
and their median, then each target of ``TARGETS`` with the runs
that met it. A run without a scenario shows a dash; a row whose balances did not match
is marked ``(wrong)``, and never counts as meeting a target.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Run = dict[str, dict[str, Any]]  # scenario name -> its row


@dataclass(frozen=True)
class Target:
    """A figure a row must reach, and how to read it off a run."""

    what: str
    read: Callable[[Run], float | None]
    bound: float
    at_least: bool  # False: under ``bound``

    def met(self, run: Run) -> bool | None:
        """None when the run lacks the figure (or its balances did not match)."""
        value = self.read(run)
        if value is None:
            return None
        return value >= self.bound if self.at_least else value < self.bound


def _figure(name: str, key: str) -> Callable[[Run], float | None]:
    def read(run: Run) -> float | None:
        row = run.get(name)
        if row is None or not row.get("correct", False) or row.get(key) is None:
            return None
        return float(row[key])

    return read


def _peak_rss(run: Run) -> float | None:
    """The highest peak RSS of the run's framework workers."""
    peaks = [
        row["peak_rss_mb"] for name, row in run.items() if name != "bare" and row.get("peak_rss_mb")
    ]
    return max(peaks) if peaks else None


TARGETS = (
    Target(
        "one consumer: at least 1.0x the bare agent", _figure("one", "ratio_to_bare"), 1.0, True
    ),
    Target("three consumers: at least 0.7x", _figure("three", "ratio_to_bare"), 0.7, True),
    Target("one consumer: p99 at half load under 100 ms", _figure("one", "p99_ms"), 100, False),
    Target(
        "three consumers: p99 at half load under 150 ms", _figure("three", "p99_ms"), 150, False
    ),
    Target(
        "relay, one process: at least 15,000 rows/s", _figure("relay", "events_per_s"), 15_000, True
    ),
    Target(
        "outbox to consumer commit: p99 under 250 ms", _figure("relay-e2e", "p99_ms"), 250, False
    ),
    Target("peak RSS of a worker under 200 MB", _peak_rss, 200, False),
)


def load(path: Path) -> tuple[dict[str, Any], Run]:
    """A results file: its header and its rows by scenario name."""
    data = json.loads(path.read_text())
    return data, {row["name"]: row for row in data["scenarios"]}


def _cell(row: dict[str, Any] | None, key: str, ratio: bool) -> str:
    if row is None or row.get(key) is None:
        return "—"
    text = f"{row[key]:,.0f}"
    if ratio and row.get("ratio_to_bare") is not None and row["name"] != "bare":
        text += f" ({row['ratio_to_bare']:.2f}x)"
    if not row.get("correct", False):
        text += " (wrong)"
    return text


def _median(rows: Sequence[dict[str, Any] | None], key: str) -> str:
    values = [float(row[key]) for row in rows if row is not None and row.get(key) is not None]
    return f"{statistics.median(values):,.0f}" if values else "—"


def table(runs: Sequence[Run], key: str, ratio: bool) -> list[str]:
    """One Markdown row per scenario that has ``key`` in any run."""
    names: list[str] = []
    for run in runs:
        names += [name for name, row in run.items() if name not in names and row.get(key)]
    head = "| Scenario | " + " | ".join(f"Run {i}" for i in range(1, len(runs) + 1))
    lines = [head + " | Median |", "|---|" + "---:|" * (len(runs) + 1)]
    for name in names:
        rows = [run.get(name) for run in runs]
        label = next(row["label"] for row in rows if row is not None)
        cells = [_cell(row, key, ratio) for row in rows]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {_median(rows, key)} |")
    return lines


OWN_CPU = "own_cpu_ms_per_1k"  # the worker's CPU per 1,000 events, the relay's for its row


def _with_own_cpu(run: Run) -> Run:
    """``run`` with each row's own process's CPU per 1,000 events under ``OWN_CPU``."""
    return {name: row | {OWN_CPU: _own_cpu(row)} for name, row in run.items()}


def _own_cpu(row: dict[str, Any]) -> float | None:
    worker = row.get("worker_cpu_ms_per_1k")
    return worker if worker is not None else row.get("relay_cpu_ms_per_1k")


def summary(paths: Sequence[Path]) -> str:
    """The Markdown summary of the runs in ``paths`` (in that order)."""
    loaded = [load(path) for path in paths]
    runs = [_with_own_cpu(run) for _, run in loaded]
    brokers = sorted({data["settings"].get("broker", "?") for data, _ in loaded})
    dates = [data["measured_at"] for data, _ in loaded]
    codes = sorted({row["code"] for run in runs for row in run.values() if row.get("code")})
    out = [
        f"{len(runs)} run(s) on {', '.join(brokers)}, {dates[0]} to {dates[-1]}, "
        f"code fingerprint(s) {', '.join(codes)}.",
        "",
        "Events/s (ratio to the same run's bare agent):",
        "",
        *table(runs, "events_per_s", ratio=True),
        "",
        "p99 ms at half load:",
        "",
        *table(runs, "p99_ms", ratio=False),
        "",
        "CPU ms per 1,000 events, the worker's (the relay's in its row):",
        "",
        *table(runs, OWN_CPU, ratio=False),
        "",
        "CPU ms per 1,000 events, the database backends':",
        "",
        *table(runs, "database_cpu_ms_per_1k", ratio=False),
        "",
        "| Target | Met in |",
        "|---|---|",
    ]
    for target in TARGETS:
        verdicts = [target.met(run) for run in runs]
        measured = [v for v in verdicts if v is not None]
        out.append(
            f"| {target.what} | {sum(measured)} of {len(measured)} runs"
            + ("" if len(measured) == len(runs) else f" ({len(runs) - len(measured)} without it)")
            + " |"
        )
    return "\n".join(out)


USAGE = "usage: python -m bench.summary RESULTS.json... (the --json-out files of python -m bench)"


def main(argv: Sequence[str]) -> int:
    if any(arg in ("-h", "--help") for arg in argv):
        print(USAGE)
        return 0
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    missing = [name for name in argv if not Path(name).is_file()]
    if missing:
        print(f"no such results file: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(summary([Path(name) for name in argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
