"""A retry or dead letter the ACLs do not let the worker write waits in place until they do.

Contract: on Apache Kafka enforcing ACLs (``StandardAuthorizer``, nothing allowed without
one), a worker whose principal may read its topics and group but not write its retry
tiers or its DLT goes on applying what succeeds; an event that fails stays as the
outbox row that routes it, held by the relay in place (``PROCESSING`` under its lease):
no attempt counted (never ``DEAD``, with ``RELAY_MAX_ATTEMPTS=2`` and many refusals),
its aggregate's later version parked
behind it, and ``/ready`` failing on the ``relay`` check with the denied topic and
permission named. Once Write on the retry tiers is granted the event goes through
them; once Write on the DLT is granted, it lands there: one record on each tier and
one dead letter, every outbox row ``PUBLISHED`` at its first attempt, ``/ready`` green.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.demo.acl_kafka import AclKafka
from app.demo.envelopes import encode
from dlq.topics import dlt_topic, retry_topic
from tests.integration.support.acls import acl_stream, create_topics, grant, grant_reading
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE_MODULES,
    dead_letters,
    probe_env,
    produce,
    records,
)
from tests.integration.support.http import get_json, readiness_is
from tests.integration.support.orders import Order
from tests.integration.support.outbox import rows
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Stream, WorkerProcess, Workers

pytestmark = pytest.mark.integration

DELAYS = (0.5, 1.0)  # the probe's RETRY_DELAYS
DENIED = "TopicAuthorizationFailed: not allowed to write {!r}"


@pytest.fixture
def stream(acl_kafka: AclKafka) -> Stream:
    """The ``workers`` fixture's topic and group, on the broker that enforces ACLs."""
    return acl_stream(acl_kafka)


async def denied_on_ready(worker: WorkerProcess, topic: str) -> str:
    """Wait until ``/ready`` fails on the relay alone, naming Write denied on ``topic``."""

    def denied(answer: tuple[int, Any]) -> bool:
        status, body = answer
        detail = str(body["checks"].get("relay", {}).get("detail", ""))
        return status == 503 and body["failed"] == ["relay"] and DENIED.format(topic) in detail

    _, body = await eventually(
        lambda: get_json(worker, "/ready"),
        denied,
        what=f"/ready to name the denied write to {topic}",
        within=60,
        workers=[worker],
    )
    return str(body["checks"]["relay"]["detail"])


async def test_a_denied_write_waits_in_place_and_goes_once_granted(
    acl_kafka: AclKafka, stream: Stream, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    tiers = [retry_topic(stream.topic, d) for d in DELAYS]
    dlt = dlt_topic(stream.topic)
    await create_topics(stream, [stream.topic, *tiers, dlt])
    grant_reading(acl_kafka, stream, [stream.topic, *tiers])
    grant(acl_kafka, "Describe", [dlt])

    env = {
        **probe_env(tmp_path / "never-fixed"),
        **acl_kafka.settings("worker"),
        "TOPICS_DECLARE": "false",
        "RELAY_MAX_ATTEMPTS": "2",
        "RELAY_BACKOFF_INITIAL_SECONDS": "0.1",
        "RELAY_BACKOFF_MAX_SECONDS": "0.2",
        "INFRA_RETRY_INITIAL_SECONDS": "0.2",
        "INFRA_RETRY_MAX_SECONDS": "1",
    }
    worker = workers.start(database_url, handler_modules=PROBE_MODULES, env=env)
    alice, mallory = Order("alice", 12_345), Order(FAIL_USER, 5_000)
    payment = mallory.paid()
    await produce(
        stream,
        [encode(e) for e in (alice.created(), alice.paid(), mallory.created(), payment)]
        + [encode(mallory.cancelled())],
    )

    # Nothing may be written to the first tier: the payment's row waits, uncounted.
    await denied_on_ready(worker, tiers[0])
    db = Database(database_url)
    try:
        await eventually(
            db.balances,
            lambda b: b == {"alice": 123},
            what="alice's points",
            within=30,
            workers=[worker],
        )
        await eventually(
            lambda: _refusals(worker.log(), tiers[0]),
            lambda n: n >= 4,
            what="the relay refused four times or more",
            within=30,
            workers=[worker],
        )
        outbox = await rows(database_url, "topic", "status", "retry_count")
        assert [(r["topic"], r["status"], r["retry_count"]) for r in outbox] == [
            (tiers[0], "PROCESSING", 0)  # held by the relay, its lease renewed, never DEAD
        ], outbox
        assert await db.parked_count() == 1  # the cancel waits behind the payment

        # The tiers may be written now: the payment goes through both, then waits for the DLT.
        grant(acl_kafka, "Write", tiers)
        await denied_on_ready(worker, dlt)
        assert await records(stream, dlt) == []

        grant(acl_kafka, "Write", [dlt])
        (dead,) = await dead_letters(stream, 1, [worker], within=60)
        await readiness_is(worker, 200, within=60)
        assert dict(dead.headers)["dlt-event-id"] == str(payment["eventId"]).encode()
        for tier in tiers:
            assert len(await records(stream, tier)) == 1, tier
        outbox = await rows(database_url, "topic", "status", "retry_count")
        assert [(r["topic"], r["status"], r["retry_count"]) for r in outbox] == [
            (tiers[0], "PUBLISHED", 0),
            (tiers[1], "PUBLISHED", 0),
            (dlt, "PUBLISHED", 0),
        ], outbox
        assert await db.balances() == {"alice": 123}
        assert await db.parked_count() == 1
    finally:
        await db.dispose()


async def _refusals(log: str, topic: str) -> int:
    return sum(1 for line in log.splitlines() if DENIED.format(topic) in line)
