"""One row of the result table, and the JSON file the rows are written to."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

METHOD = {
    "events": "Kafka records consumed from the topic's start, duplicate sends included.",
    "events_per_s": (
        "events / window; the window opens when faust's monitor (polled every 50 ms on the "
        "worker's web port) first shows an event taken by the agent, i.e. after the group "
        "join, and closes when it shows the last event acknowledged. The framework acks a "
        "batch only after its database commit, so the window ends at the last commit."
    ),
    "latency": (
        "A separate run per row on a fresh topic (and emptied tables), produced at a paced "
        "rate of half the row's events/s. Framework: per (consumer, event), "
        "consumed_event.applied_at (stamped when the batch's rows are written, just before "
        "the commit) minus the wall-clock time the bench handed the event to its producer "
        "(linger 5 ms). Bare agent: each record's age (now minus its Kafka timestamp) when "
        "the agent takes it: the transport's floor. Both consumers fetch with the worker's "
        "FETCH_MAX_WAIT_MS and FETCH_MIN_BYTES; Apache Kafka answers a fetch once that many "
        "bytes arrived or the wait is over, while Tansu holds a fetch for that whole wait "
        "when it has nothing new (part of both floors there). Nearest-rank p50/p99."
    ),
    "warm_up": (
        "Before the framework rows, up to 20,000 events are applied unmeasured and the tables "
        "ANALYZEd; every framework row then starts from emptied tables with those planner "
        "statistics (a never-analyzed database ran its first scenario about 3x slower)."
    ),
    "tx_per_1k": (
        "pg_stat_database.xact_commit of the bench database, before the worker started "
        "and after it stopped (its backends gone), per 1,000 events."
    ),
    "load_average": (
        "The machine's 1-minute load average as the window closed. The bench's own processes "
        "keep it near the CPU count; well above (1.5x), something else competed for the "
        "CPUs and the figures are pessimistic."
    ),
    "steal_percent": (
        "The share of the machine's CPU time that the hypervisor gave to other guests "
        "(/proc/stat steal), from the row's worker start to its window's close. On a shared "
        "virtual machine a row that met a slow spell on the host shows it here."
    ),
    "code": (
        "A fingerprint of the framework's source when the row's worker started; rows with "
        "different fingerprints ran different code and are flagged."
    ),
    "peak_rss_mb": "VmHWM of the worker process (/proc/<pid>/status), read before stopping it.",
    "cpu_ms_per_1k": (
        "worker_cpu_ms_per_1k and database_cpu_ms_per_1k (throughput rows): the CPU time "
        "(/proc/<pid>/stat) of the worker process and of the PostgreSQL backends connected "
        "to the bench's database over the row's window, per 1,000 events: where the work "
        "went. On a shared machine they move with the hour too; their split moves less."
    ),
    "relay": (
        "The workload's distinct events written to an empty outbox (transactions of 5,000 "
        "rows, then ANALYZE), then one python -m app relay process (default settings, "
        "RELAY_IDEMPOTENT=false on Tansu, which refuses idempotent producers) ships them; "
        "events/s from the first "
        "row's published_at to the last one's. relay_cpu_ms_per_1k: the relay process's CPU "
        "time (/proc/<pid>/stat) over that window; database_cpu_ms_per_1k: the CPU time of "
        "the PostgreSQL backends connected to the bench's database (the relay's), same window."
    ),
    "relay_latency": (
        "A relay running, rows written at 1,000/s (10 per transaction, created_at stamped as "
        "written) for the latency run's seconds; per row published_at - created_at."
    ),
    "relay_e2e": (
        "A worker with the three example consumers (RELAY_ENABLED=false) and one relay "
        "process; the workload written to the outbox at half the three-consumer row's "
        "events/s; per (consumer, event) consumed_event.applied_at - the outbox row's "
        "created_at."
    ),
    "correct": (
        "Framework rows: every balance, stock level, notification count and consumed_event "
        "count equals what the workload means (app.demo.verdict.compare). Bare: every event "
        "was acknowledged."
    ),
}


@dataclass
class Row:
    """A scenario's figures; ``None`` where a figure does not apply or was not measured."""

    name: str
    label: str
    events: int
    seconds: float
    events_per_s: float
    correct: bool
    detail: str = ""
    ratio_to_bare: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    latency_rate: float | None = None
    latency_events: int | None = None
    tx_per_1k: float | None = None
    peak_rss_mb: float | None = None
    applied_at_span_s: float | None = None
    load_average: float | None = None
    steal_percent: float | None = None
    code: str | None = None
    relay_cpu_ms_per_1k: float | None = None
    worker_cpu_ms_per_1k: float | None = None
    database_cpu_ms_per_1k: float | None = None


def with_ratios(rows: list[Row]) -> list[Row]:
    """Fill every row's ``ratio_to_bare`` from the bare row, if there is one."""
    bare = next((r for r in rows if r.name == "bare"), None)
    for row in rows:
        # A relay row's events/s is the relay's or an offered rate, not a consumer's.
        if bare is not None and bare.events_per_s > 0 and not row.name.startswith("relay"):
            row.ratio_to_bare = row.events_per_s / bare.events_per_s
    return rows


def write_json(
    path: Path, rows: list[Row], workload: dict[str, Any], settings: dict[str, Any], smoke: bool
) -> None:
    """Write the run as JSON: what ran on what, how it was measured, and every row."""
    document = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "smoke": smoke,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "workload": workload,
        "settings": settings,
        "method": METHOD,
        "correct": all(row.correct for row in rows),
        "scenarios": [asdict(row) for row in rows],
    }
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
