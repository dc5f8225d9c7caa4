"""A worker whose relay cannot run is not ready, and says why.

Contract: a worker with the default settings (an idempotent relay) on a broker that
refuses idempotent producers (Tansu 0.6 here) answers ``/ready`` with 503, naming
``relay`` as the one failed check with the broker's refusal and the setting to change
in its detail, and shows ``effectively_once_relay_failed`` 1 on ``/metrics``; the
other checks pass. The same worker with ``RELAY_IDEMPOTENT=false`` is ready, its
relay check passing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.integration.support.http import readiness_is, ready_fails_on, sample
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("idempotent", ["true", "false"])
async def test_a_refused_relay_fails_ready_by_name(
    idempotent: str,
    tansu_stream: Stream,
    make_database: Callable[[str], Awaitable[str]],
    tmp_path: Path,
) -> None:
    database_url = await make_database("postgresql")
    workers = Workers(tansu_stream, tmp_path / "workers")
    try:
        async with OrderTopic(tansu_stream):
            worker = workers.start(database_url, env={"RELAY_IDEMPOTENT": idempotent})
            if idempotent == "true":
                body = await ready_fails_on(worker, "relay", within=60)
                detail = body["checks"]["relay"]["detail"]
                assert "the relay cannot run" in detail
                assert "RELAY_IDEMPOTENT=false" in detail
                assert await sample(worker, "effectively_once_relay_failed") == 1
            else:
                body = await readiness_is(worker, 200, within=60)
                assert body["checks"]["relay"]["ok"], body
                assert await sample(worker, "effectively_once_relay_failed") == 0
    finally:
        workers.kill_all()
