"""The outbox side of integration tests: write events like an order service, read what shipped."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import func, insert, select, update

from app.db.engine import create_engine, session_factory
from app.db.tables import outbox_event
from app.kafka_clients import KafkaClients
from app.outbox import NewEvent, add_events
from app.outbox.broker import KafkaBroker
from app.outbox.relay import Relay, RelayConfig
from tests.integration.support.dlq import records
from tests.integration.support.session_broker import relay_idempotent
from tests.integration.support.workers import REPO_ROOT, Stream


def versions_of(
    topic: str, aggregates: int, versions: int, burst: int = 1, prefix: str = "agg"
) -> list[NewEvent]:
    """``versions`` events of each of ``aggregates`` aggregates, in rounds: ``burst``
    consecutive versions of every aggregate, then the next ``burst`` of every one, and so
    on (an order service writing several events of an order in one go)."""
    return [
        NewEvent(topic, "Counted", "Counter", f"{prefix}-{a}", {"n": v}, aggregate_version=v)
        for first in range(1, versions + 1, burst)
        for a in range(aggregates)
        for v in range(first, min(first + burst, versions + 1))
    ]


async def write(database_url: str, events: Sequence[NewEvent], per_transaction: int = 50) -> None:
    """Add ``events`` to the outbox in order, ``per_transaction`` per transaction."""
    engine = create_engine(database_url, pool_size=1)
    sessions = session_factory(engine)
    try:
        for start in range(0, len(events), per_transaction):
            async with sessions() as session, session.begin():
                await add_events(session, events[start : start + per_transaction])
    finally:
        await engine.dispose()


async def statuses(database_url: str) -> dict[str, int]:
    """How many outbox rows are in each status."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = select(outbox_event.c.status, func.count()).group_by(outbox_event.c.status)
            return {status: int(count) for status, count in await conn.execute(query)}
    finally:
        await engine.dispose()


async def rows(database_url: str, *columns: str) -> list[dict[str, Any]]:
    """Every outbox row's ``columns``, in id order."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = select(*(outbox_event.c[name] for name in ("id", *columns))).order_by(
                outbox_event.c.id
            )
            return [dict(row) for row in (await conn.execute(query)).mappings()]
    finally:
        await engine.dispose()


async def shipped(stream: Stream, topic: str) -> list[dict[str, Any]]:
    """The envelopes on ``topic``, partition by partition in offset order."""
    return [orjson.loads(record.value or b"") for record in await records(stream, topic)]


def out_of_order(envelopes: Iterable[dict[str, Any]], copies: bool = False) -> list[str]:
    """Where an aggregate's versions on the topic are not 1, 2, 3... (each once, in order;
    ``copies``: a version may come again right after itself, as a publish repeated after a
    crash or an outage does)."""
    last: dict[str, int] = {}
    problems = []
    for env in envelopes:
        aggregate, version = env["aggregateId"], env["aggregateVersion"]
        if copies and version == last.get(aggregate):
            continue
        if version != last.get(aggregate, 0) + 1:
            problems.append(f"{aggregate}: version {version} after {last.get(aggregate, 0)}")
        last[aggregate] = max(version, last.get(aggregate, 0))
    return problems


def copies(envelopes: Iterable[dict[str, Any]]) -> dict[str, int]:
    """eventIds found more than once."""
    counted = Counter(env["eventId"] for env in envelopes)
    return {event_id: n for event_id, n in counted.items() if n > 1}


@asynccontextmanager
async def relay_on(database_url: str, broker_url: str, **config: Any) -> AsyncIterator[Relay]:
    """A relay in this process (``config``: ``RelayConfig`` fields), its producer started."""
    engine = create_engine(database_url, pool_size=2)
    broker = KafkaBroker(KafkaClients(broker_url), idempotent=relay_idempotent())
    await broker.start()
    try:
        yield Relay(session_factory(engine), broker, RelayConfig(**config))
    finally:
        await broker.stop()
        await engine.dispose()


async def until_idle(relay: Relay, within: float = 30) -> None:
    """Run ``relay`` cycle after cycle until a claim finds nothing."""
    deadline = asyncio.get_running_loop().time() + within
    while await relay.run_once():
        assert asyncio.get_running_loop().time() < deadline, "the relay never ran out of rows"


async def claimed_by_a_dead_relay(database_url: str, ids: Sequence[int], until: datetime) -> None:
    """Leave ``ids`` as a relay that claimed them and died would: ``PROCESSING`` under its
    lease until ``until``."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(outbox_event)
                .where(outbox_event.c.id.in_(list(ids)))
                .values(status="PROCESSING", lease_owner="dead-relay", lease_expires_at=until)
            )
    finally:
        await engine.dispose()


async def insert_raw(database_url: str, *values: dict[str, Any], per_transaction: int = 1) -> None:
    """Insert rows as a producer outside Python might (only the columns given)."""
    engine = create_engine(database_url, pool_size=1)
    try:
        for start in range(0, len(values), per_transaction):
            async with engine.begin() as conn:
                await conn.execute(
                    insert(outbox_event), list(values[start : start + per_transaction])
                )
    finally:
        await engine.dispose()


def as_rows(topic: str, envelopes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outbox rows carrying ``envelopes`` as their payloads (each eventId once, first kept),
    as an order service would insert them."""
    seen: set[str] = set()
    found = []
    for env in envelopes:
        if env["eventId"] in seen:
            continue
        seen.add(env["eventId"])
        found.append(
            {
                "event_id": env["eventId"],
                "aggregate_type": env["aggregateType"],
                "aggregate_id": env["aggregateId"],
                "aggregate_version": env.get("aggregateVersion"),
                "event_type": env["eventType"],
                "topic": topic,
                "payload": orjson.dumps(env).decode(),
            }
        )
    return found


async def app_command(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python -m app *args``; its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app", *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "200", **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()
