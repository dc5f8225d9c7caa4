"""The benchmark's smoke run is correct.

Contract: ``python -m bench --smoke`` (about 1,500 events: the bare agent, the
framework with one and with three consumers, the redelivery storm without and
with Redis, and the paced latency runs) exits 0, and its JSON lists every
scenario with ``correct: true``: every balance, stock level and consumed-event
count equals what the events mean. It asserts nothing about speed; figures
from a tiny run on a shared CI machine mean nothing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.demo.broker import broker_binary
from app.demo.kafka_jars import kafka_classpath
from bench.steal import cpu_times
from tests.conftest import unavailable
from tests.integration.support.databases import CONNECT_TIMEOUT_SECONDS, POSTGRES_SERVER
from tests.integration.support.session_broker import broker_kind

pytestmark = [pytest.mark.integration, pytest.mark.soak]

REPO_ROOT = Path(__file__).resolve().parents[2]
SMOKE_TIMEOUT_SECONDS = 540
SCENARIOS = {
    *("bare", "one", "three", "storm", "three-redis", "storm-redis-cold", "storm-redis-warm"),
    *("relay", "relay-latency", "relay-e2e"),
}


@pytest.mark.timeout(SMOKE_TIMEOUT_SECONDS + 60)
async def test_bench_smoke_run_is_correct_for_every_scenario(
    tmp_path: Path, redis_url: str
) -> None:
    await _require_postgres()
    _require_broker()
    out = tmp_path / "bench-results.json"
    command = [
        sys.executable, "-m", "bench", "--smoke",
        "--json-out", str(out),
        "--postgres-server", POSTGRES_SERVER,
        "--redis-url", redis_url,
        "--broker", broker_kind(),
    ]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(SMOKE_TIMEOUT_SECONDS):
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.send_signal(signal.SIGTERM)  # the bench stops its workers and broker on SIGTERM
        await process.wait()
        raise

    report = f"stdout:\n{stdout.decode()[-6000:]}\nstderr:\n{stderr.decode()[-6000:]}"
    assert process.returncode == 0, report
    results = json.loads(out.read_text(encoding="utf-8"))
    rows = {row["name"]: row for row in results["scenarios"]}
    assert set(rows) == SCENARIOS, report
    wrong = {name: row["detail"] for name, row in rows.items() if row["correct"] is not True}
    assert not wrong, wrong
    assert results["correct"] is True
    assert results["settings"]["broker"] == broker_kind()
    for name in ("one", "three"):
        assert rows[name]["p50_ms"] is not None, f"{name}: the latency run did not report"
        # What the worker and its database backends spent, per 1,000 events (a tiny
        # window may hold no clock tick of the backends' time: present, not positive).
        assert rows[name]["worker_cpu_ms_per_1k"] is not None, report
        assert rows[name]["database_cpu_ms_per_1k"] is not None, report
    assert rows["relay"]["relay_cpu_ms_per_1k"] is not None, report
    if cpu_times() is not None:  # Linux: every row says what the host took
        assert all(row["steal_percent"] is not None for row in rows.values()), report


async def _require_postgres() -> None:
    server = make_url(POSTGRES_SERVER)
    try:
        conn = await asyncpg.connect(
            host=server.host,
            port=server.port or 5432,
            user=server.username,
            password=server.password,
            database="postgres",
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        unavailable(f"PostgreSQL at {server.host}:{server.port}: {exc!r}")
    await conn.close()


def _require_broker() -> None:
    try:
        if broker_kind() == "kafka":
            kafka_classpath()
        else:
            broker_binary()
    except Exception as exc:  # any failure to find Java, Maven or the binary means "no broker"
        unavailable(f"no {broker_kind()} broker: {exc}")
