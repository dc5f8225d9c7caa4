"""Two workers started with one ``GROUP_INSTANCE_ID`` are told apart from a calm group.

Contract: on Apache Kafka, a second worker started with the ``GROUP_INSTANCE_ID`` of one
already running takes its static membership, and the two keep taking it from each other;
``/ready`` fails on ``membership`` on a worker it happens to, naming the setting and its
value, and its log says so in an ERROR (before, both answered 200 while the partitions
went back and forth every few seconds, and the log blamed the handlers). A worker with an
id of its own beside them is not named.
"""

from __future__ import annotations

import pytest

from tests.integration.support.http import get_json, readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.session_broker import broker_kind
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

SAYS = "another worker runs with the same GROUP_INSTANCE_ID"


async def test_a_shared_instance_id_fails_ready_on_membership(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    if broker_kind() != "kafka":
        pytest.skip("static membership is Apache Kafka's (KIP-345)")
    first = workers.start(database_url, name="first", env={"GROUP_INSTANCE_ID": "orders-0"})
    await readiness_is(first, 200, within=60)
    own = workers.start(database_url, name="own", env={"GROUP_INSTANCE_ID": "orders-1"})
    second = workers.start(database_url, name="second", env={"GROUP_INSTANCE_ID": "orders-0"})

    async def bodies() -> list[object]:
        return [(await get_json(worker, "/ready"))[1] for worker in (first, second, own)]

    def named(found: list[object]) -> bool:
        return any(
            isinstance(body, dict) and "membership" in body.get("failed", []) for body in found[:2]
        )

    found = await eventually(
        bodies, named, what="/ready to fail on membership", within=90, workers=[first, second]
    )
    details = [
        body["checks"]["membership"]["detail"]
        for body in found[:2]
        if isinstance(body, dict) and "membership" in body.get("failed", [])
    ]
    assert all("GROUP_INSTANCE_ID=orders-0" in d and SAYS in d for d in details), details
    assert any(SAYS in worker.log() for worker in (first, second))
    own_body = found[2]
    assert isinstance(own_body, dict)
    assert own_body["checks"]["membership"]["ok"] is True, own_body
