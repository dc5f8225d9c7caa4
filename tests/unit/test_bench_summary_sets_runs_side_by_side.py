"""``python -m bench.summary`` sets several runs' results side by side.

Contract (``bench.summary``): one row per scenario with each run's events/s and ratio
to that run's bare agent, and their median; p99, and the CPU per 1,000 events of the
worker (the relay's in its row) and of the database, in tables of their own; each target
with the runs that met it. A row whose balances did not match is marked and never
meets a target; a run without a scenario is counted apart.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.summary import main, summary


def results(path: Path, one: float, bare: float = 20_000, correct: bool = True) -> Path:
    rows = [
        {
            "name": "bare",
            "label": "bare faust agent",
            "events_per_s": bare,
            "correct": True,
            "ratio_to_bare": 1.0,
            "p99_ms": 90.0,
            "peak_rss_mb": 120.0,
            "code": "abc",
        },
        {
            "name": "one",
            "label": "framework, 1 consumer",
            "events_per_s": one,
            "correct": correct,
            "ratio_to_bare": one / bare,
            "p99_ms": 95.0,
            "peak_rss_mb": 150.0,
            "code": "abc",
            "worker_cpu_ms_per_1k": 60_000 / one,
            "database_cpu_ms_per_1k": 30.0,
        },
        {
            "name": "relay",
            "label": "relay, 1 process",
            "events_per_s": 12_000.0,
            "correct": True,
            "relay_cpu_ms_per_1k": 50.0,
            "database_cpu_ms_per_1k": 40.0,
        },
    ]
    data = {
        "measured_at": "2026-12-05T00:00:00+00:00",
        "settings": {"broker": "kafka"},
        "scenarios": rows,
    }
    path.write_text(json.dumps(data))
    return path


def test_each_run_its_median_and_the_targets_met(tmp_path: Path) -> None:
    runs = [
        results(tmp_path / "a.json", one=20_000),
        results(tmp_path / "b.json", one=10_000),
        results(tmp_path / "c.json", one=30_000, correct=False),
    ]
    text = summary(runs)
    assert (
        "| framework, 1 consumer | 20,000 (1.00x) | 10,000 (0.50x) "
        "| 30,000 (1.50x) (wrong) | 20,000 |" in text
    )
    # The wrong run's 1.5x does not count; nor does a run lacking three consumers.
    assert "| one consumer: at least 1.0x the bare agent | 1 of 2 runs (1 without it) |" in text
    assert "| one consumer: p99 at half load under 100 ms | 2 of 2 runs (1 without it) |" in text
    assert "| three consumers: at least 0.7x | 0 of 0 runs (3 without it) |" in text
    assert "| peak RSS of a worker under 200 MB | 3 of 3 runs |" in text
    # CPU per 1,000 events: the worker's, the relay's in its row; the database's.
    assert "| framework, 1 consumer | 3 | 6 | 2 (wrong) | 3 |" in text
    assert "| relay, 1 process | 50 | 50 | 50 | 50 |" in text
    assert "| relay, 1 process | 40 | 40 | 40 | 40 |" in text


def test_a_missing_file_is_named_without_a_traceback(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([str(tmp_path / "nowhere.json")]) == 2
    assert "no such results file" in capsys.readouterr().err


def test_help_says_what_it_takes(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m bench.summary RESULTS.json")
