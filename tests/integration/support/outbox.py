"""The outbox side of integration tests: write events like an order service, read what shipped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import func, select

from app.db.engine import create_engine, session_factory
from app.db.tables import outbox_event
from app.outbox import NewEvent, add_events
from tests.integration.support.dlq import records
from tests.integration.support.workers import Stream


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


def out_of_order(envelopes: Iterable[dict[str, Any]]) -> list[str]:
    """Where an aggregate's versions on the topic are not 1, 2, 3... (each once, in order)."""
    last: dict[str, int] = {}
    problems = []
    for env in envelopes:
        aggregate, version = env["aggregateId"], env["aggregateVersion"]
        if version != last.get(aggregate, 0) + 1:
            problems.append(f"{aggregate}: version {version} after {last.get(aggregate, 0)}")
        last[aggregate] = max(version, last.get(aggregate, 0))
    return problems


def copies(envelopes: Iterable[dict[str, Any]]) -> dict[str, int]:
    """eventIds found more than once."""
    counted = Counter(env["eventId"] for env in envelopes)
    return {event_id: n for event_id, n in counted.items() if n > 1}


