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
from tests.integration.support.workers import Workers, the_one_line

pytestmark = pytest.mark.integration


async def test_a_taken_web_port_is_named_and_a_free_one_starts(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line = the_one_line(workers.start(database_url, web_port=port))

    assert f"web port {port}" in line, line
    assert "--web-port" in line, line

    again = workers.start(database_url, web_port=port)  # free now
    await readiness_is(again, 200, within=60)
