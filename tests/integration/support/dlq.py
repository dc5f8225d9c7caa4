"""For the DLQ command's integration tests: run ``python -m dlq``, produce with headers,
read topics and ``failed_event`` rows, and wait for a worker to catch up.

The failing consumer is ``dlq-probe`` (``tests.integration.support.dlq_probe``):
workers started with ``probe_env`` fail ``FAIL_USER``'s payments until the
flag file exists.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from sqlalchemy import select

from app.db.engine import create_engine
from app.db.tables import failed_event
from app.demo.envelopes import Message, encode
from app.kafka_clients import KafkaClients
from app.records import RawRecord
from dlq.broker import read_topic
from dlq.errors import NothingMatched
from dlq.topics import dlt_topic
from tests.integration.support.orders import Order
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import REPO_ROOT, Stream, WorkerProcess, Workers

PROBE_MODULES = "handlers,tests.integration.support.dlq_probe"  # the example brings user_points
PROBE = "dlq-probe"
FAIL_USER = "mallory"
RETRY_DELAYS = "0.5,1"  # two tiers: three attempts in about two seconds
CLI_TIMEOUT_SECONDS = 60


def probe_env(fixed_flag: Path) -> dict[str, str]:
    """Worker settings: the probe fails ``FAIL_USER`` until ``fixed_flag`` exists."""
    return {
        "RETRY_DELAYS": RETRY_DELAYS,
        "CONSUMERS": PROBE,  # not the example consumers
        "DLQ_PROBE_FAIL_USER": FAIL_USER,
        "DLQ_PROBE_FIXED": str(fixed_flag),
    }


@dataclass(frozen=True)
class Ran:
    """A finished ``python -m dlq`` run."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as JSON."""
        return orjson.loads(self.out)


@dataclass(frozen=True)
class DlqCommand:
    """``python -m dlq`` with the test's broker, topic and database in its environment."""

    stream: Stream
    database_url: str
    user: str = "tester"

    async def __call__(self, *args: str, env: Mapping[str, str] | None = None) -> Ran:
        """Run the command with ``args``; its exit code and output."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dlq",
            *args,
            cwd=REPO_ROOT,
            env={**self._env(), **(env or {})},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT_SECONDS)
        assert process.returncode is not None
        return Ran(process.returncode, out.decode(), err.decode())

    def _env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
        env.update(
            BROKER_URL=self.stream.broker_url,
            DATABASE_URL=self.database_url,
            ORDER_TOPIC=self.stream.topic,
            USER=self.user,
        )
        return env


async def produce(
    stream: Stream, messages: Iterable[Message], headers: Sequence[tuple[str, bytes]] = ()
) -> list[tuple[int, int]]:
    """Send ``messages`` (each with ``headers``) in order; their (partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=stream.bootstrap, acks="all")
    await producer.start()
    try:
        sent = [
            await producer.send_and_wait(
                stream.topic, message.value, key=message.key, headers=list(headers)
            )
            for message in messages
        ]
    finally:
        await producer.stop()
    return [(meta.partition, meta.offset) for meta in sent]


async def records(stream: Stream, topic: str) -> list[RawRecord]:
    """Every record of ``topic`` (empty while it does not exist)."""
    try:
        return await read_topic(KafkaClients(f"kafka://{stream.bootstrap}"), topic)
    except NothingMatched:  # the topic does not exist yet
        return []


async def dead_letters(
    stream: Stream, count: int, workers: Iterable[WorkerProcess], within: float = 45
) -> list[RawRecord]:
    """Wait until the test's DLT holds ``count`` records; return them."""
    dlt = dlt_topic(stream.topic)
    return await eventually(
        lambda: records(stream, dlt),
        lambda found: len(found) >= count,
        what=f"{count} record(s) on {dlt}",
        within=within,
        workers=workers,
    )


async def caught_up(stream: Stream, workers: Iterable[WorkerProcess], within: float = 45) -> None:
    """Wait until the worker group has committed every record now on the main topic."""
    ends: dict[int, int] = {}
    for record in await records(stream, stream.topic):
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    admin = AIOKafkaAdminClient(bootstrap_servers=stream.bootstrap)
    await admin.start()
    partitions = [TopicPartition(stream.topic, p) for p in ends]

    async def behind() -> dict[int, int]:
        committed = await admin.list_consumer_group_offsets(stream.app_id, partitions=partitions)
        done = {tp.partition: meta.offset for tp, meta in committed.items() if meta.offset >= 0}
        return {p: end - done.get(p, 0) for p, end in ends.items() if end > done.get(p, 0)}

    try:
        await eventually(
            behind,
            lambda lag: not lag,
            what="the group to catch up",
            within=within,
            workers=workers,
        )
    finally:
        await admin.close()


async def failures(database_url: str) -> list[dict[str, Any]]:
    """Every ``failed_event`` row's key, status and decision."""
    t = failed_event
    columns = (t.c.consumer_group, t.c.event_id, t.c.status, t.c.attempts, t.c.reason)
    query = select(*columns, t.c.decided_by, t.c.decision_note).order_by(t.c.offset)
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return [dict(row) for row in (await conn.execute(query)).mappings()]
    finally:
        await engine.dispose()


async def failed_rows(database_url: str) -> list[dict[str, Any]]:
    """Every ``failed_event`` row, every column."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = select(failed_event).order_by(failed_event.c.offset)
            return [dict(row) for row in (await conn.execute(query)).mappings()]
    finally:
        await engine.dispose()


TRACE = ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")


@dataclass(frozen=True)
class DeadPayment:
    """``FAIL_USER``'s order whose payment (v2) died for the probe, its cancel (v3) parked."""

    order: Order
    paid: dict[str, Any]
    cancelled: dict[str, Any]
    paid_at: tuple[int, int]
    dead: RawRecord
    worker: WorkerProcess

    @property
    def event_id(self) -> str:
        """The dead payment's eventId."""
        return str(self.paid["eventId"])

    @property
    def position(self) -> str:
        """The dead record's ``partition:offset`` in the DLT."""
        return f"{self.dead.partition}:{self.dead.offset}"


async def a_payment_dies(
    stream: Stream,
    workers: Workers,
    database_url: str,
    fixed_flag: Path,
    env: Mapping[str, str] | None = None,
) -> DeadPayment:
    """Start a probe worker (``env``: more settings); alice's order applies, mallory's
    payment goes through every retry tier to the DLT and her cancel waits behind it."""
    worker = workers.start(
        database_url, handler_modules=PROBE_MODULES, env={**probe_env(fixed_flag), **(env or {})}
    )
    alice, mallory = Order("alice", 12_345), Order(FAIL_USER, 5_000)
    paid, cancelled = mallory.paid(), mallory.cancelled()
    sent = await produce(
        stream,
        [encode(e) for e in (alice.created(), alice.paid(), mallory.created(), paid, cancelled)],
        [TRACE],
    )
    (dead,) = await dead_letters(stream, 1, [worker])
    return DeadPayment(mallory, paid, cancelled, sent[3], dead, worker)
