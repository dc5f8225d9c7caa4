"""``python -m app relay`` tells an operator what is wrong in one line, never a password.

Contract: a setting it cannot use (an invalid value, a metrics port in use or on an
address the host does not have, a broker
that refuses idempotent producers with ``RELAY_IDEMPOTENT`` on: Tansu 0.6) ends it with exit
code 2 and one line naming the problem, no traceback. An unreachable database (given
with a password) or a database without the outbox table is waited for, with a log
line per attempt that shows the address without its password; SIGTERM then ends it
at once with exit code 0.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Stream

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-pass"


def finished(relays: Relays, env: dict[str, str], database_url: str, broker_url: str) -> str:
    relay = relays.start(database_url, broker_url, env)
    assert relay.process.wait(timeout=60) == 2, relay.log()
    return relay.log()


async def test_settings_it_cannot_use_end_it_with_one_line(
    stream: Stream, tansu_stream: Stream, tmp_path: Path
) -> None:
    relays = Relays(tmp_path / "relays")
    database = f"sqlite+aiosqlite:///{tmp_path / 'none.db'}"
    try:
        said = finished(relays, {"RELAY_BATCH_SIZE": "0"}, database, stream.broker_url)
        assert said.splitlines() == [
            "effectively-once relay: invalid settings:",
            "  RELAY_BATCH_SIZE: Input should be greater than or equal to 1",
        ]
        with socket.socket() as busy:
            busy.bind(("0.0.0.0", 0))
            busy.listen()
            port = str(busy.getsockname()[1])
            said = finished(relays, {"RELAY_METRICS_PORT": port}, database, stream.broker_url)
        assert said.startswith(f"effectively-once relay: cannot serve metrics on port {port}")
        assert len(said.splitlines()) == 1
        # An address this host does not have (TEST-NET-1): one line naming the setting.
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = str(free.getsockname()[1])
        elsewhere = {"RELAY_METRICS_PORT": port, "RELAY_METRICS_BIND": "192.0.2.1"}
        said = finished(relays, elsewhere, database, stream.broker_url)
        assert said.startswith(
            f"effectively-once relay: cannot serve metrics on port {port} of 192.0.2.1"
        )
        assert "RELAY_METRICS_BIND" in said
        assert len(said.splitlines()) == 1
        # Tansu 0.6: a broker without idempotent producers.
        said = finished(relays, {"RELAY_IDEMPOTENT": "true"}, database, tansu_stream.broker_url)
        assert "set RELAY_IDEMPOTENT=false for a broker without it" in said
        assert "Traceback" not in said
    finally:
        relays.kill_all()


@pytest.mark.parametrize("where", ["unreachable", "unmigrated"])
async def test_a_database_it_cannot_use_is_waited_for_and_sigterm_ends_it(
    where: str, stream: Stream, tmp_path: Path
) -> None:
    if where == "unreachable":
        url = f"postgresql+asyncpg://postgres:{SECRET}@127.0.0.1:9/nowhere"
        expected = "claiming outbox rows failed (attempt 1, database unreachable?)"
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        expected = "no outbox_event table in the database: run the migrations"
    relays = Relays(tmp_path / "relays")
    try:
        relay = relays.start(url, stream.broker_url)

        async def log() -> str:
            return relay.log()

        await eventually(log, lambda text: expected in text, what=expected, within=30)
        started = time.monotonic()
        assert relay.stop() == 0
        assert time.monotonic() - started < 10
        text = relay.log()
    finally:
        relays.kill_all()
    assert SECRET not in text
    assert "Traceback" not in text
    if where == "unreachable":
        assert "postgresql+asyncpg://postgres:***@127.0.0.1:9/nowhere" in text
