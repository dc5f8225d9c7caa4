"""The relay's rows: throughput of one relay process, its latency, and outbox-to-commit latency.

- *throughput*: the workload's distinct events are written to an empty outbox,
  then one ``python -m app relay`` ships them; events/s over the window from the
  first row's ``published_at`` to the last one's. The relay's CPU time and its
  database backends' CPU time (``/proc`` of each, between the first and the last
  row published) are given per 1,000 rows.
- *latency*: a relay running, rows are written at ``RELAY_LATENCY_RATE`` events/s
  (ten per transaction); each row's ``published_at`` minus its ``created_at``.
- *end to end*: a worker (the three example consumers, its own relay off) and a
  relay process; the workload is written to the outbox at half the consumers'
  measured events/s; each ``consumed_event.applied_at`` minus its outbox row's
  ``created_at``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.db.dialect import insert_rows
from app.db.engine import create_engine, session_factory
from app.db.tables import outbox_event
from app.demo.envelopes import Message, decode
from app.demo.order_service import as_event
from app.demo.produce import ensure_topic
from app.demo.workload import Workload
from app.kafka_clients import KafkaClients
from bench.cpu import CpuMeter
from bench.latency import percentile
from bench.results import Row
from bench.scenarios import THREE, check, describe, framework_env
from bench.session import Session
from bench.steal import cpu_times, steal_percent
from bench.workload import SEED, make_workload, orders_for
from dlq.broker import read_topic

RELAY_LATENCY_RATE = 1_000.0
ROWS_PER_TRANSACTION = 10
WRITE_CHUNK = 5_000
# Waiting for the last row counts the whole outbox each time: every 50 ms that scan took
# a share of the two cores from the relay it measures. The window itself is read from
# the rows' published_at, so the poll's pace does not move it.
PROGRESS_POLL_SECONDS = 0.5
TIMEOUT_SECONDS = 300.0


def outbox_rows(workload: Workload, topic: str) -> list[dict[str, Any]]:
    """The workload's distinct events as outbox rows (first send of each kept)."""
    seen: set[str] = set()
    rows = []
    now = datetime.now(UTC)
    for env in map(decode, workload.messages):
        if env["eventId"] not in seen:
            seen.add(env["eventId"])
            rows.append(as_event(topic, env).row(now))
    return rows


class RelayProcess:
    """``python -m app relay`` on the bench's database and broker, logging to a file."""

    def __init__(self, session: Session, name: str) -> None:
        self.log_path = session.workdir / f"{name}.log"
        env = {
            **os.environ,
            "DATABASE_URL": session.database.sqlalchemy_url,
            "BROKER_URL": session.config.broker_url,
            "RELAY_METRICS_PORT": "0",
            "RELAY_IDEMPOTENT": str(session.broker.idempotent).lower(),
        }
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app", "relay"],
                cwd=session.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self) -> None:
        """SIGTERM, then wait."""
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)


# Index probes on ``(status, id)``: a count of the whole outbox (tens of milliseconds of
# PostgreSQL's CPU at every poll) would compete with the relay it measures.
_ANY_PUBLISHED = "SELECT EXISTS (SELECT 1 FROM outbox_event WHERE status = 'PUBLISHED')"
_ANY_UNPUBLISHED = (
    "SELECT EXISTS (SELECT 1 FROM outbox_event WHERE status IN ('PENDING', 'PROCESSING'))"
)


async def any_published(session: Session) -> bool:
    """True once the relay published a row."""
    [row] = await session.database.fetch(_ANY_PUBLISHED)
    return bool(row[0])


async def all_published(session: Session) -> bool:
    """True once no row waits (none is ``PENDING`` or ``PROCESSING``)."""
    [row] = await session.database.fetch(_ANY_UNPUBLISHED)
    return not row[0]


async def write(session: Session, rows: Sequence[dict[str, Any]], chunk: int = WRITE_CHUNK) -> None:
    """Insert ``rows`` in transactions of ``chunk``."""
    engine = create_engine(session.database.sqlalchemy_url, pool_size=1)
    sessions = session_factory(engine)
    try:
        for start in range(0, len(rows), chunk):
            async with sessions() as db, db.begin():
                await insert_rows(db, outbox_event, list(rows[start : start + chunk]))
    finally:
        await engine.dispose()


async def write_paced(session: Session, rows: Sequence[dict[str, Any]], rate: float) -> None:
    """Insert ``rows`` at ``rate`` per second, ``ROWS_PER_TRANSACTION`` per transaction, each
    row's ``created_at`` stamped as it is written."""
    engine = create_engine(session.database.sqlalchemy_url, pool_size=1)
    sessions = session_factory(engine)
    start = time.monotonic()
    try:
        for first in range(0, len(rows), ROWS_PER_TRANSACTION):
            delay = start + first / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            now = datetime.now(UTC)
            chunk = [
                row | {"created_at": now, "updated_at": now}
                for row in rows[first : first + ROWS_PER_TRANSACTION]
            ]
            async with sessions() as db, db.begin():
                await insert_rows(db, outbox_event, chunk)
    finally:
        await engine.dispose()


async def until_published(session: Session, relay: RelayProcess) -> None:
    """Poll until every row is published (raises if the relay dies or stalls)."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not await all_published(session):
        if relay.process.poll() is not None:
            raise RuntimeError(
                f"the relay exited with {relay.process.returncode}; see {relay.log_path}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every outbox row published within {TIMEOUT_SECONDS:.0f} s")
        await asyncio.sleep(PROGRESS_POLL_SECONDS)


async def throughput(session: Session) -> Row:
    """One relay process shipping the workload's distinct events from a full outbox."""
    topic = f"bench-relay-{session.tag}"
    await ensure_topic(session.broker.bootstrap, topic, session.config.partitions)
    await session.database.empty()
    rows = outbox_rows(session.workload, topic)
    await write(session, rows)
    await session.database.analyze()
    relay = RelayProcess(session, "relay-throughput")
    host_before = cpu_times()
    try:
        while not await any_published(session):
            if relay.process.poll() is not None:
                raise RuntimeError(f"the relay exited; see {relay.log_path}")
            await asyncio.sleep(0.01)
        meter = CpuMeter(relay.process.pid, session.database)
        await meter.open()
        await until_published(session, relay)
        spent = await meter.close()
        load = os.getloadavg()[0]
        stolen = steal_percent(host_before, cpu_times())
    finally:
        relay.stop()
    first, last, shipped = await published_window(session)
    seconds = max(last - first, 1e-9)
    on_topic = await records_on(session, topic)
    correct = shipped == len(rows) and on_topic == len(rows)
    relay_ms, database_ms = spent.per_1k_ms(len(rows))
    return Row(
        name="relay",
        label="relay, 1 process",
        events=len(rows),
        seconds=seconds,
        events_per_s=len(rows) / seconds,
        correct=correct,
        detail=(
            f"{shipped:,} rows PUBLISHED, {on_topic:,} events on the topic; relay CPU "
            f"{relay_ms:,.1f} ms and its database backends' CPU {database_ms:,.1f} ms per "
            "1,000 rows"
        ),
        load_average=load,
        steal_percent=stolen,
        relay_cpu_ms_per_1k=relay_ms,
        database_cpu_ms_per_1k=database_ms,
    )


async def published_window(session: Session) -> tuple[float, float, int]:
    """First and last ``published_at`` (epoch seconds) and the published count."""
    [row] = await session.database.fetch(
        "SELECT extract(epoch FROM min(published_at)), extract(epoch FROM max(published_at)), "
        "count(*) FROM outbox_event WHERE status = 'PUBLISHED'"
    )
    return float(row[0]), float(row[1]), int(row[2])


async def latencies(session: Session, sql: str) -> list[float]:
    """Seconds, one per row of ``sql`` (which selects one epoch difference)."""
    return [float(row[0]) for row in await session.database.fetch(sql)]


async def records_on(session: Session, topic: str) -> int:
    """How many distinct events ``topic`` holds, read back from the broker."""
    records = await read_topic(KafkaClients(session.broker.url), topic)
    return len({decode(Message(r.key, r.value or b""))["eventId"] for r in records})


def latency_row(
    name: str,
    label: str,
    rate: float,
    seconds: list[float],
    correct: bool,
    detail: str,
    stolen: float | None,
) -> Row:
    """A row carrying only latency figures."""
    ordered = sorted(seconds)
    p50, p99 = percentile(ordered, 50), percentile(ordered, 99)
    return Row(
        name=name,
        label=label,
        events=len(ordered),
        seconds=0.0,
        events_per_s=rate,
        correct=correct and bool(ordered),
        detail=detail,
        p50_ms=None if p50 is None else p50 * 1000,
        p99_ms=None if p99 is None else p99 * 1000,
        latency_rate=rate,
        latency_events=len(ordered),
        load_average=os.getloadavg()[0],
        steal_percent=stolen,
    )


async def relay_latency(session: Session, rate: float = RELAY_LATENCY_RATE) -> Row:
    """Rows written at ``rate`` per second while one relay runs: written to published."""
    topic = f"bench-relay-latency-{session.tag}"
    await ensure_topic(session.broker.bootstrap, topic, session.config.partitions)
    await session.database.empty()
    workload = make_workload(orders_for(rate * session.options.latency_seconds), seed=SEED + 2)
    rows = outbox_rows(workload, topic)
    relay = RelayProcess(session, "relay-latency")
    host_before = cpu_times()
    try:
        await asyncio.sleep(2)  # the relay is up and polling
        await write_paced(session, rows, rate)
        await until_published(session, relay)
    finally:
        relay.stop()
    seconds = await latencies(
        session, "SELECT extract(epoch FROM published_at - created_at) FROM outbox_event"
    )
    return latency_row(
        "relay-latency",
        f"relay, written to published at {rate:,.0f}/s",
        rate,
        seconds,
        len(seconds) == len(rows),
        f"{len(seconds):,} of {len(rows):,} rows published",
        steal_percent(host_before, cpu_times()),
    )


async def end_to_end(session: Session, rate: float) -> Row:
    """The three example consumers behind a relay: outbox row written to consumer commit."""
    topic = f"bench-relay-e2e-{session.tag}"
    await ensure_topic(session.broker.bootstrap, topic, session.config.partitions)
    await session.database.empty()
    workload = make_workload(orders_for(rate * session.options.latency_seconds), seed=SEED + 3)
    rows = outbox_rows(workload, topic)
    env = framework_env(session, THREE, app_id=session.app_id("relay-e2e"), topic=topic)
    env["RELAY_ENABLED"] = "false"  # the relay process below ships the outbox
    relay = RelayProcess(session, "relay-e2e-relay")  # the worker logs to relay-e2e.log
    host_before = cpu_times()
    try:
        await session.measure(
            session.worker("relay-e2e", env),
            len(rows),
            count_transactions=False,
            before_events=lambda: write_paced(session, rows, rate),
        )
    finally:
        relay.stop()
    seconds = await latencies(
        session,
        "SELECT extract(epoch FROM c.applied_at - o.created_at) FROM consumed_event c "
        "JOIN outbox_event o ON o.event_id = c.event_id",
    )
    verdict = await check(session, workload.expected, THREE.consumers)
    return latency_row(
        "relay-e2e",
        f"outbox to consumer commit, 3 consumers at {rate:,.0f}/s",
        rate,
        seconds,
        verdict.ok,
        describe(verdict),
        steal_percent(host_before, cpu_times()),
    )
