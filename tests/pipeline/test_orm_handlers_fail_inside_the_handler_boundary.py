"""A handler that writes through the ORM fails like any handler, not at the commit.

Contract: objects a handler adds with ``ctx.session.add`` are flushed before the
handler call returns to the framework, so a row the database refuses (here a
NOT NULL column left empty) fails that handler call: the event is routed like any
handler failure (no value where one is required: to the DLT at once, as no retry can
change it), the other events of the batch commit with
their ORM rows, and the processor returns instead of raising at the commit
(which crash-looped the worker). A batch handler's rows flush once per call.
"""

from __future__ import annotations

from sqlalchemy import String, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds


class Base(DeclarativeBase):
    pass


class LedgerEntry(Base):
    __tablename__ = "ledger_entry"

    event_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    note: Mapped[str] = mapped_column(String(40), nullable=False)


def entry(event: Event) -> LedgerEntry:
    """The event ``bad`` leaves the NOT NULL ``note`` empty."""
    note = None if event.event_id == "bad" else f"paid {event.aggregate_id}"
    return LedgerEntry(event_id=event.event_id, note=note)  # type: ignore[arg-type]


async def ledger(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return sorted((await conn.scalars(select(LedgerEntry.event_id))).all())


async def test_a_row_the_database_refuses_routes_its_event_and_the_rest_commit(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    engine: AsyncEngine,
    db: Db,
) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)

    @handler("OrderPaid", consumer="ledger", registry=registry)
    async def book(event: Event, ctx: HandlerContext) -> None:
        ctx.session.add(entry(event))

    batch = [
        records.event("good-1", aggregate_id="o-1"),
        records.event("bad", aggregate_id="o-2"),
        records.event("good-2", aggregate_id="o-3"),
    ]

    outcomes = await make_processor().process(batch)

    assert kinds(outcomes) == [
        ("good-1", Kind.APPLIED),
        ("bad", Kind.DEAD_LETTERED),
        ("good-2", Kind.APPLIED),
    ]
    assert await ledger(engine) == ["good-1", "good-2"]
    assert await db.consumed("ledger") == ["good-1", "good-2"]
    [failed] = await db.failed("ledger")
    assert failed["event_id"] == "bad"
    assert failed["exception_type"].endswith("IntegrityError")


async def test_a_batch_handler_adding_rows_commits_them_all(
    make_processor: MakeProcessor, registry: Registry, records: Records, engine: AsyncEngine
) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)

    @handler("OrderPaid", consumer="ledger", registry=registry, batch=True)
    async def book_all(events: list[Event], ctx: HandlerContext) -> None:
        ctx.session.add_all([entry(event) for event in events])

    batch = [records.event(f"e{n}", aggregate_id=f"o-{n}") for n in range(5)]

    outcomes = await make_processor().process(batch)

    assert {kind for _, kind in kinds(outcomes)} == {Kind.APPLIED}
    assert await ledger(engine) == [f"e{n}" for n in range(5)]
    async with engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(LedgerEntry)) == 5
