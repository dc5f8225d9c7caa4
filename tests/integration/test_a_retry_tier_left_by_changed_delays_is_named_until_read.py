"""Records left in a retry tier that ``RETRY_DELAYS`` no longer names are named, then read.

Contract: a worker that does not read a retry tier of its topic where records of its
deployment wait (``RETRY_DELAYS`` changed while an event was in that tier) fails
``/ready`` on ``retry tiers``, naming the tier, how many records wait and
``RETRY_DELAYS_RETIRED`` with the tier's delay, and logs it; it still applies what it
reads. Started with that setting, a worker reads the tier (its records due as before,
nothing new routed to it): the event applies once, and ``/ready`` is green.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.envelopes import encode
from dlq.topics import retry_topic
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE,
    PROBE_MODULES,
    TRACE,
    failures,
    probe_env,
    produce,
    records,
)
from tests.integration.support.http import get_json, readiness_is, ready_fails_on
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

TIER = 6.0  # the tier the event waits in when the delays change
CHANGED = "0.5,20"


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_left_tier_turns_ready_red_until_retired_delays_read_it(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    stream = topic.stream
    fixed = tmp_path / "fixed"
    env = {**probe_env(fixed), "RETRY_DELAYS": f"0.5,{TIER:g}"}
    first = workers.start(database_url, handler_modules=PROBE_MODULES, env=env)
    mallory = Order(FAIL_USER, 5_000)
    paid = mallory.paid()
    await produce(stream, [encode(e) for e in (mallory.created(), paid)], [TRACE])
    tier = retry_topic(stream.topic, TIER)
    await eventually(
        lambda: records(stream, tier),
        lambda found: len(found) == 1,
        what=f"the payment's record in {tier}",
        within=60,
        workers=[first],
    )
    assert first.stop() == 0
    fixed.touch()  # fixed: the payment applies once a worker reads it again

    changed = workers.start(
        database_url, handler_modules=PROBE_MODULES, env={**env, "RETRY_DELAYS": CHANGED}
    )
    body = await ready_fails_on(changed, "retry tiers", within=60)
    said = body["checks"]["retry tiers"]["detail"]
    assert f"{tier} (1 record(s))" in said and f"RETRY_DELAYS_RETIRED={TIER:g}" in said, said
    assert await db.balances() == {}
    assert changed.stop() == 0
    assert f"RETRY_DELAYS_RETIRED={TIER:g}" in changed.log()

    retired = workers.start(
        database_url,
        handler_modules=PROBE_MODULES,
        env={**env, "RETRY_DELAYS": CHANGED, "RETRY_DELAYS_RETIRED": f"{TIER:g}"},
    )
    await eventually(
        db.balances,
        lambda balances: balances == {FAIL_USER: 50},
        what="the payment applied once from the retired tier",
        within=60,
        workers=[retired],
    )
    body = await readiness_is(retired, 200, within=30)
    assert body["checks"]["retry tiers"]["ok"]
    assert await failures(database_url) == [
        {
            "consumer_group": PROBE,
            "event_id": paid["eventId"],
            "status": "resolved",
            "attempts": 2,
            "reason": "retryable",
            "decided_by": None,
            "decision_note": None,
        }
    ]
    assert (await get_json(retired, "/health"))[0] == 200
