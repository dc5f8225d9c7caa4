"""A worker starts only when every topic it needs is there for it; otherwise one line names them.

Contract: the worker needs its topic, each retry tier, the DLT and every topic its
handlers name in ``emits``. With ``TOPICS_DECLARE=false`` (it creates nothing) it
checks at start that each exists: those missing end it with exit code 2 and one line
naming each of them and the setting, before it joins the group; once they exist it
starts and is ready. On a broker that enforces ACLs, a topic its principal may not
``Describe`` ends it the same way, naming the topic and the permission, whatever
``TOPICS_DECLARE`` says: no traceback, no password. So does a topic it would have to
create with more copies (``TOPIC_REPLICATION_FACTOR``) than the cluster has brokers up,
faust's leader topic among them (faust creates it with that factor); so does a topic it
would create that its principal may not ``Create`` (faust's leader topic among them, also
when it exists: faust asks to create it at every start), and a consumer group
(``APP_ID``) its principal may not use. Read on the group revoked while it runs stops it
the same way at its next commit, once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.demo.acl_kafka import AclKafka
from app.demo.produce import ensure_topic
from dlq.topics import dlt_topic, retry_topic
from tests.integration.support.acls import USER, acl_stream, create_topics, grant, grant_reading
from tests.integration.support.http import readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import created_and_paid
from tests.integration.support.workers import (
    REPO_ROOT,
    Stream,
    WorkerProcess,
    Workers,
    the_one_line,
)

pytestmark = pytest.mark.integration

BILLING = '''\
"""A user's billing service: one handler emitting to a topic of its own."""

import os

from app import Envelope, HandlerContext, NewEvent, handler
from schemas.order import OrderPaid

BILLS = os.environ["BILLS_TOPIC"]


@handler("OrderPaid", consumer="billing", emits=(BILLS,))
async def bill(event: Envelope[OrderPaid], ctx: HandlerContext) -> None:
    ctx.emit(NewEvent(BILLS, "Billed", "Order", event.aggregate_id, {"paid": True}))
'''
DELAYS = (1.0, 5.0)
ACL_WORKER_WITHIN = 90  # a start refused, or the first fetch refused


def billing_env(folder: Path, stream: Stream, **extra: str) -> dict[str, str]:
    """The worker's environment: ``billing`` importable, two retry tiers, its topic its own."""
    (folder / "billing.py").write_text(BILLING)
    return {
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(folder)]),
        "BILLS_TOPIC": f"{stream.topic}-bills",
        "RETRY_DELAYS": ",".join(f"{d:g}" for d in DELAYS),
        **extra,
    }


def besides_its_own(stream: Stream, env: dict[str, str]) -> list[str]:
    """The topics the billing worker needs besides the test's: its tiers, DLT, bills."""
    return [
        *(retry_topic(stream.topic, d) for d in DELAYS),
        dlt_topic(stream.topic),
        env["BILLS_TOPIC"],
    ]


async def test_missing_topics_are_named_at_start_and_it_starts_once_they_exist(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stream = topic.stream
    env = billing_env(tmp_path, stream, TOPICS_DECLARE="false")
    needed = besides_its_own(stream, env)
    worker = workers.start(database_url, handler_modules="billing", env=env)
    line = the_one_line(worker)
    assert "TOPICS_DECLARE=false" in line, line
    for name in needed:
        assert repr(name) in line, line
    assert repr(stream.topic) not in line, line  # it exists

    for name in needed:
        await ensure_topic(stream.bootstrap, name, stream.partitions)
    again = workers.start(database_url, handler_modules="billing", env=env)
    await readiness_is(again, 200, within=60)


async def test_topics_it_cannot_create_with_the_replication_factor_are_named_at_start(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stream = topic.stream
    env = billing_env(tmp_path, stream, TOPIC_REPLICATION_FACTOR="3")
    worker = workers.start(database_url, handler_modules="billing", env=env)
    line = the_one_line(worker)
    assert "TOPIC_REPLICATION_FACTOR=3 and the cluster has 1 broker(s) up" in line, line
    assert repr(dlt_topic(stream.topic)) in line, line
    assert repr(env["BILLS_TOPIC"]) in line, line
    assert repr(stream.topic) not in line, line  # it exists


async def test_fausts_leader_topic_counts_among_those_it_cannot_create(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stream = topic.stream
    env = billing_env(tmp_path, stream, TOPIC_REPLICATION_FACTOR="3")
    ours = besides_its_own(stream, env)
    for name in ours:
        await ensure_topic(stream.bootstrap, name, stream.partitions)
    worker = workers.start(database_url, handler_modules="billing", env=env)
    line = the_one_line(worker)
    assert "TOPIC_REPLICATION_FACTOR=3 and the cluster has 1 broker(s) up" in line, line
    assert repr(f"{stream.app_id}-__assignor-__leader") in line, line
    for name in (stream.topic, *ours):
        assert repr(name) not in line, line  # they exist


async def acl_topics(acl_kafka: AclKafka) -> tuple[Stream, list[str], str]:
    """The test's stream on the ACL broker, its topic, retry tiers (``DELAYS``) and DLT
    created by a super user; returns the stream, the tiers and the DLT."""
    stream = acl_stream(acl_kafka)
    tiers = [retry_topic(stream.topic, d) for d in DELAYS]
    dlt = dlt_topic(stream.topic)
    await create_topics(stream, [stream.topic, *tiers, dlt])
    return stream, tiers, dlt


async def ended_acl_worker(
    acl_kafka: AclKafka, stream: Stream, database_url: str, tmp_path: Path, *, declare: bool
) -> WorkerProcess:
    """A worker of the example consumers as ``worker`` on the ACL broker, once it ended (or
    was killed after ``ACL_WORKER_WITHIN`` seconds)."""
    workers = Workers(stream, tmp_path / "workers")
    env = {"RETRY_DELAYS": "1,5", **acl_kafka.settings("worker")}
    if not declare:
        env["TOPICS_DECLARE"] = "false"
    try:
        worker = workers.start(database_url, handler_modules="handlers", env=env)
        worker.exit_code(within=ACL_WORKER_WITHIN)
    finally:
        workers.kill_all()
    return worker


async def test_a_topic_it_may_not_describe_is_named_with_the_permission(
    acl_kafka: AclKafka, database_url: str, tmp_path: Path
) -> None:
    stream, tiers, dlt = await acl_topics(acl_kafka)
    grant_reading(acl_kafka, stream, [stream.topic, *tiers])  # nothing on the DLT
    settings = acl_kafka.settings("worker")
    worker = await ended_acl_worker(acl_kafka, stream, database_url, tmp_path, declare=False)
    line = the_one_line(worker)
    assert f"Describe on topic {dlt!r}" in line, line
    assert "TopicAuthorizationFailed" in line, line
    assert "worker" in line, line
    assert settings["BROKER_SASL_PASSWORD"] not in line
    for allowed in (stream.topic, *tiers):
        assert repr(allowed) not in line, line


async def test_a_group_it_may_not_use_is_named_with_the_permission(
    acl_kafka: AclKafka, database_url: str, tmp_path: Path
) -> None:
    """Every topic there and readable, the group (``APP_ID``) denied: one line naming the
    group and the permission. (faust's consumer waited for the group without a word.)"""
    stream, tiers, dlt = await acl_topics(acl_kafka)
    grant(acl_kafka, "Read", [stream.topic, *tiers, dlt])  # Read implies Describe; no group
    settings = acl_kafka.settings("worker")
    worker = await ended_acl_worker(acl_kafka, stream, database_url, tmp_path, declare=False)
    line = the_one_line(worker)
    assert f"its consumer group {stream.app_id!r}" in line, line
    assert "GroupAuthorizationFailed" in line and "Read on the group" in line, line
    assert settings["BROKER_SASL_PASSWORD"] not in line


async def test_a_topic_it_may_not_create_is_named_with_the_permission(
    acl_kafka: AclKafka, database_url: str, tmp_path: Path
) -> None:
    """``TOPICS_DECLARE=true`` (the default) and no Create allowed: the topics it would
    create, faust's leader topic among them, in one line, exit code 2. (faust's leader
    assignor met the refusal with a traceback, exit code 1.)"""
    stream, tiers, dlt = await acl_topics(acl_kafka)
    grant_reading(acl_kafka, stream, [stream.topic, *tiers, dlt])
    worker = await ended_acl_worker(acl_kafka, stream, database_url, tmp_path, declare=True)
    line = the_one_line(worker)
    assert worker.exit_code(within=30) == 2, worker.tail()
    assert "Create on" in line and repr(f"{stream.app_id}-__assignor-__leader") in line, line
    assert "TOPICS_DECLARE=false" in line, line
    assert "Traceback" not in worker.log(), worker.tail()


async def test_a_topic_it_may_not_read_stops_it_in_one_line(
    acl_kafka: AclKafka, database_url: str, tmp_path: Path
) -> None:
    """Describe granted (the start's check passes) but not Read: the first fetch the
    broker refuses stops the worker with exit code 2 and one ERROR line naming the topic
    and the permission. (faust's fetcher crashed: two tracebacks, exit code 1.)"""
    stream, tiers, dlt = await acl_topics(acl_kafka)
    grant(acl_kafka, "Describe", [stream.topic, *tiers, dlt])
    acl_kafka.grant("worker", "--operation", "Read", "--group", stream.app_id)
    acl_kafka.grant("worker", "--operation", "IdempotentWrite", "--cluster")
    settings = acl_kafka.settings("worker")
    worker = await ended_acl_worker(acl_kafka, stream, database_url, tmp_path, declare=False)
    code, log = worker.exit_code(within=0), worker.log()
    assert code == 2, log
    (line,) = [text for text in log.splitlines() if "configuration error" in text]
    assert "[ERROR]" in line and "Read on topic" in line, line
    assert "TopicAuthorizationFailed" in line, line
    assert "Traceback" not in log and "Crashed" not in log, log
    assert settings["BROKER_SASL_PASSWORD"] not in log


async def test_an_existing_leader_topic_it_may_not_create_stops_it_in_one_line(
    acl_kafka: AclKafka, database_url: str, tmp_path: Path
) -> None:
    """Every topic there, faust's leader topic too, and no Create allowed: faust asks to
    create its leader topic at every start and the broker refuses before it looks, so
    ``TOPICS_DECLARE=true`` names it, in one line. (The check passed and faust's start
    crashed with a traceback, exit code 1.)"""
    stream, tiers, dlt = await acl_topics(acl_kafka)
    leader = f"{stream.app_id}-__assignor-__leader"
    await create_topics(stream, [leader])
    grant_reading(acl_kafka, stream, [stream.topic, *tiers, dlt, leader])
    worker = await ended_acl_worker(acl_kafka, stream, database_url, tmp_path, declare=True)
    line = the_one_line(worker)
    assert worker.exit_code(within=30) == 2, worker.tail()
    assert "Create on" in line and repr(leader) in line, line
    assert "Traceback" not in worker.log(), worker.tail()


async def test_a_group_it_may_no_longer_read_stops_it_in_one_line(
    acl_kafka: AclKafka, database_url: str, tmp_path: Path
) -> None:
    """Read on its consumer group revoked while it runs: the next commit the broker
    refuses stops the worker with exit code 2 and one ERROR line naming the group and
    the permission. (faust's consumer crashed: two tracebacks, exit code 1.)"""
    stream, tiers, dlt = await acl_topics(acl_kafka)
    grant_reading(acl_kafka, stream, [stream.topic, *tiers, dlt])
    grant(acl_kafka, "Write", [*tiers, dlt])
    workers = Workers(stream, tmp_path / "workers")
    env = {"RETRY_DELAYS": "1,5", "TOPICS_DECLARE": "false", **acl_kafka.settings("worker")}
    try:
        worker = workers.start(database_url, handler_modules="handlers", env=env)
        await readiness_is(worker, 200, within=ACL_WORKER_WITHIN)
        acl_kafka.revoke(USER, "--operation", "Read", "--group", stream.app_id)
        async with OrderTopic(stream) as topic:
            await topic.send(created_and_paid(5))
        code, log = worker.exit_code(within=ACL_WORKER_WITHIN), worker.log()
    finally:
        workers.kill_all()
    assert code == 2, log
    (line,) = [text for text in log.splitlines() if "configuration error" in text]
    assert "[ERROR]" in line and f"Read on group {stream.app_id!r}" in line, line
    assert "Traceback" not in log and "Crashed" not in log, log
