"""A worker without a relay of its own turns ``/ready`` red once its records wait for one.

Contract: a worker started with ``RELAY_ENABLED=false`` and no relay on its database,
whose handler fails an event, writes the event's retry record to the outbox and ships
nothing; ``/ready`` stays green until that row has waited ``RELAY_STALL_SECONDS``, then
fails on its ``outbox`` check, asking whether a relay runs (before, it stayed green while
the event waited for ever). A relay started on the database ships the row, and
``/ready`` is green again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.envelopes import encode
from tests.integration.support.dlq import FAIL_USER, PROBE_MODULES, probe_env, produce
from tests.integration.support.http import readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.relays import Relays
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def test_records_no_relay_ships_turn_ready_red(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stream = topic.stream
    env = {
        **probe_env(tmp_path / "never-fixed"),
        "RELAY_ENABLED": "false",
        "RELAY_STALL_SECONDS": "3",
    }
    worker = workers.start(database_url, handler_modules=PROBE_MODULES, env=env)
    await readiness_is(worker, 200, within=90)
    mallory = Order(FAIL_USER, 5_000)
    await produce(stream, [encode(mallory.created()), encode(mallory.paid())])

    body = await readiness_is(worker, 503, within=60)
    assert body["failed"] == ["outbox"], body
    assert "is a relay running" in body["checks"]["outbox"]["detail"]

    relays = Relays(tmp_path / "relays")
    try:
        relays.start(database_url, stream.broker_url)
        body = await readiness_is(worker, 200, within=60)
        assert body["checks"]["outbox"]["ok"] is True
    finally:
        relays.kill_all()
