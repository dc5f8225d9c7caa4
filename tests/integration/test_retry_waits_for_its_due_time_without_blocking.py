"""A retry record waits for its due time, and the main topic flows meanwhile.

Contract: with one retry tier of 4 s, a payment whose handler fails lands on
``<topic>.retry.4s`` with a ``retry-due-at`` four seconds after its failure;
events sent to the main topic after that are applied while it waits (the DLT
is still empty when they are); the retry runs no earlier than its due time
(its second failure, recorded as ``dlt-last-failure-at``, is not before
``retry-due-at``) and, failing again, lands on the DLT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.envelopes import encode
from dlq import headers as h
from dlq.dead import parse_time
from dlq.topics import dlt_topic, retry_topic
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE_MODULES,
    dead_letters,
    probe_env,
    produce,
    records,
)
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

DELAY = 4


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_main_topic_flows_while_a_retry_waits_for_its_due_time(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    stream = topic.stream
    env = probe_env(tmp_path / "never-fixed") | {"RETRY_DELAYS": str(DELAY)}
    worker = workers.start(database_url, handler_modules=PROBE_MODULES, env=env)
    mallory, alice = Order(FAIL_USER, 5_000), Order("alice", 12_345)
    await produce(stream, [encode(mallory.created()), encode(mallory.paid())])

    tier = retry_topic(stream.topic, DELAY)
    (waiting,) = await eventually(
        lambda: records(stream, tier),
        lambda found: len(found) == 1,
        what=f"the failed payment on {tier}",
        within=60,
        workers=[worker],
    )
    await produce(stream, [encode(alice.created()), encode(alice.paid())])
    await eventually(
        db.balances,
        lambda balances: "alice" in balances,
        what="alice's payment applied",
        within=30,
        workers=[worker],
    )
    assert await records(stream, dlt_topic(stream.topic)) == [], (
        "the retry ran before its due time, or the main topic waited for it"
    )

    (dead,) = await dead_letters(stream, 1, [worker], within=60)
    due = parse_time(waiting.header(h.RETRY_DUE_AT).decode())
    second_failure = parse_time(dead.header(h.DLT_LAST_FAILURE_AT).decode())
    first_failure = parse_time(dead.header(h.DLT_FIRST_FAILURE_AT).decode())
    assert second_failure >= due
    assert (due - first_failure).total_seconds() == pytest.approx(DELAY, abs=0.01)
    assert dead.header(h.DLT_ATTEMPTS) == b"2"
    assert (await db.balances())["alice"] == 123
