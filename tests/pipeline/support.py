"""What the pipeline tests share besides fixtures: the ``effect`` table, reads of the
database, the frozen clock, the records the pipeline left in the outbox, and a bounded
``process`` for tests where a broken check would make a batch run again forever.

Test handlers write one ``effect`` row per call through ``ctx.session``, so a
rolled-back effect is visible as a missing row and a doubled one as two rows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db import tables
from app.db.engine import session_factory
from app.db.tables import outbox_event
from app.metrics import REGISTRY
from app.outbox.message import Message, message_of
from app.pipeline.decode import EventOf
from app.pipeline.outcomes import Kind, Outcome
from app.pipeline.processor import RERUN_CONFLICT, BatchProcessor
from app.pipeline.route import FailureRouter
from app.records import RawRecord
from app.testing import NOW as TESTING_NOW
from app.testing import FrozenClock as TestingClock
from dlq.policy import RetryPolicy
from tests.pipeline.events import TOPIC

MakeProcessor = Callable[..., BatchProcessor]

test_metadata = MetaData()

effect = Table(
    "effect",
    test_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("consumer", String(100), nullable=False),
    Column("event_id", String(128), nullable=False),
    Column("aggregate_id", String(128), nullable=False),
    Column("aggregate_version", Integer, nullable=True),
)


def sequential_processor(
    engine: AsyncEngine, registry: Any, delays: Sequence[float] = (1.0, 5.0), **options: Any
) -> BatchProcessor:
    """A processor of ``registry``'s consumers over ``engine``, one consumer after another,
    failures routed through retry tiers of ``delays`` seconds on ``TOPIC``; ``options`` as
    ``BatchProcessor`` takes them (``backoff``...)."""
    return BatchProcessor(
        session_factory(engine),
        registry,
        FailureRouter(RetryPolicy(TOPIC, tuple(delays))),
        concurrent_consumers=False,
        **options,
    )


async def write_effect(event: Any, ctx: HandlerContext) -> None:
    """What a test handler does to the database: one ``effect`` row per call."""
    await ctx.session.execute(
        insert(effect).values(
            consumer=ctx.consumer,
            event_id=event.event_id,
            aggregate_id=event.aggregate_id,
            aggregate_version=event.aggregate_version,
        )
    )


def database_down(error: OSError) -> OperationalError:
    """What a handler's statement raises when the database is gone: SQLAlchemy's
    ``OperationalError`` around the driver's ``error`` (a handler's own ``OSError``, one not
    raised through the database, is the event's failure instead)."""
    return OperationalError("SELECT 1", {}, error)


def kinds(
    outcomes: Sequence[Outcome], consumer: str | None = None
) -> list[tuple[str | None, Kind]]:
    """``(event_id, kind)`` per outcome, in order (only ``consumer``'s if given)."""
    return [(o.event_id, o.kind) for o in outcomes if consumer is None or o.consumer == consumer]


class Db:
    """Reads what the pipeline left in the database, outside any pipeline transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def rows(self, table: Table, **where: Any) -> list[dict[str, Any]]:
        """Every row of ``table`` whose columns equal ``where``."""
        stmt = select(table)
        for name, value in where.items():
            stmt = stmt.where(table.c[name] == value)
        async with self.engine.connect() as conn:
            return [dict(row) for row in (await conn.execute(stmt)).mappings()]

    async def consumed(self, consumer: str) -> list[str]:
        """Event ids with a dedup record for ``consumer``, sorted."""
        rows = await self.rows(tables.consumed_event, consumer_group=consumer)
        return sorted(r["event_id"] for r in rows)

    async def effects(self, consumer: str | None = None) -> list[str]:
        """Event ids of the committed handler effects, in the order they were written."""
        where = {} if consumer is None else {"consumer": consumer}
        rows = await self.rows(effect, **where)
        return [r["event_id"] for r in sorted(rows, key=lambda r: r["id"])]

    async def version(self, consumer: str, aggregate_id: str = "o-1") -> int | None:
        """``last_version`` of the aggregate for ``consumer`` (``None``: none applied yet)."""
        rows = await self.rows(
            tables.aggregate_version, consumer_group=consumer, aggregate_id=aggregate_id
        )
        return rows[0]["last_version"] if rows else None

    async def parked(self, consumer: str) -> list[str]:
        """Event ids parked for ``consumer``, sorted."""
        rows = await self.rows(tables.parked_event, consumer_group=consumer)
        return sorted(r["event_id"] for r in rows)

    async def failed(self, consumer: str | None = None) -> list[dict[str, Any]]:
        """``failed_event`` rows (of ``consumer`` if given), by offset."""
        where = {} if consumer is None else {"consumer_group": consumer}
        return sorted(await self.rows(tables.failed_event, **where), key=lambda r: r["offset"])


# The instant every pipeline test's router sees, unless the test moves the clock.
NOW = TESTING_NOW
FrozenClock = TestingClock


class Outbox:
    """The retry and DLT records the pipeline wrote to the outbox, as the relay sends them
    (``app.outbox.message``), in the order they were written."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def records(self) -> list[Message]:
        """Every record in the outbox, in id order."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(outbox_event).order_by(outbox_event.c.id))).mappings()
            return [message_of(row) for row in rows]

    async def to(self, topic: str) -> list[Message]:
        """The records for ``topic``, in order."""
        return [r for r in await self.records() if r.topic == topic]


def header_map(record: Message) -> dict[str, str]:
    """A record's headers as text (the tests check elsewhere that none repeats)."""
    return {name: value.decode() for name, value in record.headers}


# One processor and no other writer: a batch never loses a race, so a few conflicts in a
# row already mean it never will commit.
MAX_CONFLICT_RERUNS = 3
PROCESS_SECONDS = 30.0  # a backstop: an endless rerun is caught by its count first


async def process_bounded(
    processor: BatchProcessor, records: Sequence[RawRecord], within: float = PROCESS_SECONDS
) -> list[Outcome]:
    """``processor.process(records)``, failing at once, with the reason, when the batch keeps
    being rolled back and run again, and after ``within`` seconds in any case.

    A duplicate that gets past the dedup check is applied again, and its dedup record
    then collides with the one already written: the batch is taken for the loser of a
    race (``VersionConflict``), rolled back and run again, forever. An event without an
    ``aggregateVersion`` has no version gate to stop it before that."""
    before = conflict_reruns()
    running = asyncio.ensure_future(processor.process(records))
    deadline = asyncio.get_running_loop().time() + within
    try:
        while not running.done():
            await asyncio.wait({running}, timeout=0.02)
            reruns = conflict_reruns() - before
            assert reruns <= MAX_CONFLICT_RERUNS, (
                f"the batch was rolled back and run again {reruns:.0f} times, each time over "
                "a dedup record written meanwhile, with no other writer: an event already "
                "applied got past the dedup check and collides with its own dedup record"
            )
            assert asyncio.get_running_loop().time() < deadline, (
                f"the batch did not finish within {within:g}s"
            )
        return running.result()
    finally:
        if not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running


def conflict_reruns() -> float:
    """Batches rolled back and run again over a conflict, in this process (every consumer)."""
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "effectively_once_batch_reruns"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("reason") == RERUN_CONFLICT
    )


class KnowingRedis:
    """The Redis prefilter in memory: it knows every event it was told of, as it was told it."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], EventOf] = {}

    async def known(self, consumer: str, event_ids: Sequence[str]) -> dict[str, EventOf]:
        return {i: self.keys[consumer, i] for i in event_ids if (consumer, i) in self.keys}

    async def remember(self, consumer: str, applied: Mapping[str, EventOf]) -> None:
        self.keys.update(((consumer, i), event) for i, event in applied.items())
