"""``python -m app relay`` serves ``/ready`` beside ``/metrics`` on ``RELAY_METRICS_PORT``.

Contract: a relay that runs, on a migrated database and a reachable broker, answers
``/ready`` with 200 and the worker's body (``status`` ``ready``, its ``relay`` check
with the rows published, and the worker's ``database`` and ``broker`` checks); one whose
database cannot be reached answers 503 at once on its ``database`` check, and on ``relay``
too once no cycle ended for ``RELAY_STALL_SECONDS`` (before, a standalone relay had only
``/metrics``: nothing an orchestrator could act on; then only the ``relay`` check, green
for ``RELAY_STALL_SECONDS``). One whose broker cannot be reached answers 503 at once on
its ``broker`` check, naming the address (before, green for ``RELAY_STALL_SECONDS``, and
for ever while no row waited). One on
a database never migrated answers 503 at once, naming the missing table and the
command that creates it (before, it stayed ready for ``RELAY_STALL_SECONDS``). One whose
``DATABASE_URL`` names a database the server does not have waits for it, and answers 503 at
once, saying to check the name or create it; so do its log lines (before, they said
``database unreachable?`` and ``/ready`` stayed green for ``RELAY_STALL_SECONDS``).
``/metrics`` still serves the relay's metrics.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from app.demo.broker import free_port
from tests.integration.support.http import get_at, get_json_at
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Stream

pytestmark = pytest.mark.integration


async def test_a_running_relay_is_ready(
    migrated_database: str, stream: Stream, tmp_path: Path
) -> None:
    port = free_port()
    relays = Relays(tmp_path / "relays")
    try:
        relays.start(migrated_database, stream.broker_url, {"RELAY_METRICS_PORT": str(port)})

        status, body = await eventually(
            lambda: get_json_at(port, "/ready"),
            lambda got: got[0] == 200,
            what="/ready 200",
            within=60,
        )
        assert body["status"] == "ready" and body["failed"] == []
        assert body["checks"]["relay"]["ok"] is True
        assert "row(s) published" in body["checks"]["relay"]["detail"]
        assert body["checks"]["database"]["detail"] == "SELECT 1 answered"
        assert body["checks"]["broker"]["detail"].endswith("accepts connections")
        status, metrics = await get_at(port, "/metrics")
        assert status == 200 and "effectively_once_relay" in metrics
    finally:
        relays.kill_all()


@pytest.mark.parametrize("stall", [None, "2"])
async def test_a_relay_that_cannot_reach_its_database_is_not_ready(
    stream: Stream, tmp_path: Path, stall: str | None
) -> None:
    port = free_port()
    relays = Relays(tmp_path / "relays")
    env = {"RELAY_METRICS_PORT": str(port)} | ({"RELAY_STALL_SECONDS": stall} if stall else {})
    try:
        relays.start("postgresql+asyncpg://postgres:pw@127.0.0.1:9/nowhere", stream.broker_url, env)

        _, body = await eventually(
            lambda: get_json_at(port, "/ready"),
            lambda got: got[0] == 503 and (stall is None or "relay" in got[1]["failed"]),
            what="/ready 503",
            within=30,
        )
        assert body["status"] == "not ready"
        assert body["failed"] == (["database"] if stall is None else ["relay", "database"])
        assert "127.0.0.1:9" in body["checks"]["database"]["detail"], body
        assert "pw" not in str(body)
        if stall:
            assert body["checks"]["relay"]["detail"].startswith("no relay cycle ended for ")
    finally:
        relays.kill_all()


async def test_a_relay_that_cannot_reach_its_broker_says_so_at_once(
    migrated_database: str, tmp_path: Path
) -> None:
    port, nowhere = free_port(), free_port()
    relays = Relays(tmp_path / "relays")
    env = {"RELAY_METRICS_PORT": str(port)}  # the default RELAY_STALL_SECONDS: 120
    try:
        relays.start(migrated_database, f"kafka://127.0.0.1:{nowhere}", env)

        _, body = await eventually(
            lambda: get_json_at(port, "/ready"),
            lambda got: got[0] == 503,
            what="/ready 503 long before RELAY_STALL_SECONDS",
            within=30,
        )
        assert body["failed"] == ["broker"], body
        assert f"127.0.0.1:{nowhere}" in body["checks"]["broker"]["detail"], body
    finally:
        relays.kill_all()


async def test_a_relay_on_a_database_never_migrated_says_so_at_once(
    make_database: Callable[[str], Awaitable[str]], stream: Stream, tmp_path: Path
) -> None:
    database_url = await make_database("postgresql")  # no migrations run on it
    port = free_port()
    relays = Relays(tmp_path / "relays")
    env = {"RELAY_METRICS_PORT": str(port)}  # the default RELAY_STALL_SECONDS: 120
    try:
        relays.start(database_url, stream.broker_url, env)

        _, body = await eventually(
            lambda: get_json_at(port, "/ready"),
            lambda got: got[0] == 503,
            what="/ready 503 long before RELAY_STALL_SECONDS",
            within=30,
        )
        assert body["failed"] == ["relay"]
        assert body["checks"]["relay"]["detail"].startswith(
            "the database has no outbox_event table: run the migrations"
        )
    finally:
        relays.kill_all()


async def test_a_relay_on_a_database_that_does_not_exist_says_so_at_once(
    make_database: Callable[[str], Awaitable[str]], stream: Stream, tmp_path: Path
) -> None:
    existing = await make_database("postgresql")
    missing = f"{existing}_never_created"
    port = free_port()
    relays = Relays(tmp_path / "relays")
    env = {"RELAY_METRICS_PORT": str(port)}  # the default RELAY_STALL_SECONDS: 120
    try:
        relay = relays.start(missing, stream.broker_url, env)

        _, body = await eventually(
            lambda: get_json_at(port, "/ready"),
            lambda got: got[0] == 503,
            what="/ready 503 long before RELAY_STALL_SECONDS",
            within=30,
        )
        detail = body["checks"]["relay"]["detail"]
        assert body["failed"] == ["relay", "database"]
        assert "does not exist" in detail, detail
        assert "check its name, or create it; waiting for it" in detail, detail
        log = relay.log()
        assert "check its name, or create it" in log, log
        assert "database unreachable?" not in log, log
    finally:
        relays.kill_all()
