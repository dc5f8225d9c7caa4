"""A worker whose web port another process holds stops at start, in one line.

Contract (``app.runtime.web_port``): faust binds the worker's web server (``/ready``,
``/metrics``) on ``--web-port``; a port already listened on (a second worker on the same
host, with the same port) ends the worker before it joins its group, with exit code 2
and one line naming the port and the option, no traceback. A free port starts it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.integration.support.http import readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

WITHIN = 30  # Python's start and the handlers' import
PREFIX = "effectively-once: configuration error: "


async def test_a_taken_web_port_is_named_and_a_free_one_starts(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        worker = workers.start(database_url, web_port=port)
        code = worker.exit_code(WITHIN)
        log = worker.log()

    assert code == 2, log
    assert "Traceback" not in log, log
    lines = log.strip().splitlines()
    assert len(lines) == 1, log
    assert lines[0].startswith(PREFIX), log
    assert f"web port {port}" in lines[0], log
    assert "--web-port" in lines[0], log

    again = workers.start(database_url, web_port=port)  # free now
    await readiness_is(again, 200, within=60)
