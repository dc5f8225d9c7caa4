"""Emitting to a topic nobody created takes no step beyond ``ctx.emit``.

Contract, on the test broker (``auto.create.topics.enable=false``): a worker whose
handler names ``invoices`` in ``@handler(..., emits=...)`` has created it by the time it
is ready, before any event, with ``ORDER_TOPIC_PARTITIONS`` partitions; the other topic
the handler emits to (``audit``, not named) is created by the relay before its first
publish. Every emitted event reaches its topic at the first attempt (no outbox row
retried) and ``/ready`` stays green. With ``TOPICS_DECLARE=false`` nothing is created
(the worker starts only once the topics it knows of exist: its own and those named in
``emits``): ``/ready`` fails on the relay check naming a missing topic only the
handler's body names, and the setting, and once someone creates it the rows ship and
``/ready`` is green again. Where the
broker refuses to create a topic (a replication factor it cannot meet, here), the
relay's check names the topic and the broker's reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from app.demo.envelopes import encode, envelope
from app.demo.produce import ensure_topic
from app.monitoring.readiness import Check
from app.outbox import NewEvent
from app.outbox.runner import RelayRunner
from app.settings import Settings
from dlq.topics import dlt_topic
from tests.integration.support.http import readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import rows, shipped, write
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import REPO_ROOT, Stream, Workers

pytestmark = pytest.mark.integration

INVOICING = '''\
"""A user's invoicing service: one handler emitting to two topics of its own."""

import os

from pydantic import BaseModel

from app import Envelope, HandlerContext, NewEvent, event_model, handler

INVOICES = os.environ["INVOICES_TOPIC"]
AUDIT = os.environ["AUDIT_TOPIC"]


@event_model("InvoiceDue", version=1)
class InvoiceDue(BaseModel):
    customer: str
    cents: int


@handler("InvoiceDue", consumer="invoicing", emits=(INVOICES,))
async def issue(event: Envelope[InvoiceDue], ctx: HandlerContext) -> None:
    data = {"customer": event.data.customer, "cents": event.data.cents}
    ctx.emit(NewEvent(INVOICES, "InvoiceIssued", "Invoice", event.aggregate_id, data))
    ctx.emit(NewEvent(AUDIT, "InvoiceAudited", "Invoice", event.aggregate_id, data))
'''


def due(invoice: str, cents: int) -> dict[str, object]:
    return envelope("InvoiceDue", invoice, 1, {"customer": "acme", "cents": cents})


def invoicing_env(folder: Path, stream: Stream, **extra: str) -> dict[str, str]:
    """The worker's environment: ``invoicing`` importable, its topics this test's own."""
    (folder / "invoicing.py").write_text(INVOICING)
    return {
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(folder)]),
        "INVOICES_TOPIC": f"{stream.topic}-invoices",
        "AUDIT_TOPIC": f"{stream.topic}-audit",
        "RELAY_BACKOFF_INITIAL_SECONDS": "0.2",
        "RELAY_BACKOFF_MAX_SECONDS": "0.5",
        **extra,
    }


async def partitions(stream: Stream) -> dict[str, int]:
    """Each topic on the broker and its number of partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=stream.bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(await admin.list_topics())
        return {topic["topic"]: len(topic["partitions"]) for topic in described}
    finally:
        await admin.close()


async def test_the_worker_and_the_relay_create_the_topics_the_handler_emits_to(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stream = topic.stream
    env = invoicing_env(tmp_path, stream)
    invoices, audit = env["INVOICES_TOPIC"], env["AUDIT_TOPIC"]
    worker = workers.start(database_url, handler_modules="invoicing", env=env)
    await readiness_is(worker, 200, within=60)

    before = await partitions(stream)
    assert before.get(invoices) == stream.partitions  # declared at start, before any event
    assert audit not in before

    await topic.send([encode(due("inv-1", 1_250)), encode(due("inv-2", 50))])
    await topic.drained(workers=[worker])
    for name in (invoices, audit):
        on_topic = await eventually(
            lambda name=name: shipped(stream, name),  # type: ignore[misc]
            lambda found: len(found) == 2,
            what=f"two events on {name}",
            within=30,
            workers=[worker],
        )
        assert sorted(e["aggregateId"] for e in on_topic) == ["inv-1", "inv-2"]

    outbox = await rows(database_url, "topic", "status", "retry_count")
    assert {(r["topic"], r["status"], r["retry_count"]) for r in outbox} == {
        (invoices, "PUBLISHED", 0),
        (audit, "PUBLISHED", 0),
    }
    assert (await partitions(stream))[audit] == stream.partitions
    body = await readiness_is(worker, 200, within=5)
    assert body["checks"]["relay"]["ok"], body


async def test_with_topics_declare_false_ready_names_the_missing_topic(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stream = topic.stream
    env = invoicing_env(
        tmp_path, stream, TOPICS_DECLARE="false", RETRY_DELAYS="", RELAY_MAX_ATTEMPTS="1000"
    )
    invoices, audit = env["INVOICES_TOPIC"], env["AUDIT_TOPIC"]
    # What the worker checks for at start (its DLT and the topic named in ``emits``) exists;
    # the topic only the handler's body names does not.
    for name in (dlt_topic(stream.topic), invoices):
        await ensure_topic(stream.bootstrap, name, 1)
    worker = workers.start(database_url, handler_modules="invoicing", env=env)
    await readiness_is(worker, 200, within=60)

    await topic.send([encode(due("inv-1", 1_250))])
    await topic.drained(workers=[worker])
    body = await readiness_is(worker, 503, within=30)
    assert body["failed"] == ["relay"], body
    detail = body["checks"]["relay"]["detail"]
    assert f"topic {audit!r} does not exist on the broker" in detail
    assert "TOPICS_DECLARE=false" in detail
    assert audit not in await partitions(stream)

    await ensure_topic(stream.bootstrap, audit, 1)
    await readiness_is(worker, 200, within=30)
    for name in (invoices, audit):
        await eventually(
            lambda name=name: shipped(stream, name),  # type: ignore[misc]
            lambda found: len(found) == 1,
            what=f"the event on {name}",
            within=30,
            workers=[worker],
        )


async def test_a_topic_the_broker_refuses_to_create_is_named_with_the_reason(
    stream: Stream, migrated_database: str
) -> None:
    refused = f"{stream.topic}-refused"
    await write(migrated_database, [NewEvent(refused, "Counted", "Counter", "c-1", {"n": 1})])
    settings = Settings(
        database_url=migrated_database,
        broker_url=stream.broker_url,
        topic_replication_factor=3,  # one broker: Kafka refuses to create such a topic
        relay_backoff_initial_seconds=0.2,
    )
    runner = RelayRunner(settings, sample=False)
    runner.start()
    try:
        check = await eventually(
            lambda: _health(runner),
            lambda found: not found.ok,
            what="the relay check to fail",
            within=30,
        )
    finally:
        await runner.stop()
    assert f"topic {refused!r} does not exist on the broker" in check.detail
    assert "creating it was refused: InvalidReplicationFactorError" in check.detail
    assert refused not in await partitions(stream)


async def _health(runner: RelayRunner) -> Check:
    return runner.health()
