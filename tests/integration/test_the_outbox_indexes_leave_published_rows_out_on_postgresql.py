"""On PostgreSQL the outbox's scan indexes hold only the rows not published (revision 0006).

Contract: on a database upgraded from ``0005`` with rows in its outbox, and on a
fresh one, ``ix_outbox_event_status_id`` and ``ix_outbox_event_aggregate`` are
partial (``status <> 'PUBLISHED'``) and hold an entry for each unpublished row and
for no published one; the relay's claim still finds its rows through them (each of
its statements that reads rows by status or by aggregate is planned on them, with
sequential scans off so that only an index whose condition the query implies can
serve); downgrading to ``0005`` indexes every row again, every row kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine, session_factory
from app.db.histories import FRAMEWORK
from app.db.migrate import alembic_config, upgrade_to_head
from app.db.tables import outbox_event
from app.outbox.claim import claim
from tests.sent_statements import sent

pytestmark = pytest.mark.integration

INDEXES = ("ix_outbox_event_status_id", "ix_outbox_event_aggregate")
PARTIAL = "WHERE ((status)::text <> 'PUBLISHED'::text)"
STATUSES = ["PUBLISHED"] * 6 + ["PENDING"] * 3 + ["DEAD"]


def to_revision(connection: Connection, revision: str, down: bool = False) -> None:
    """The framework's history up (or down) to ``revision`` on ``connection``."""
    config = alembic_config(FRAMEWORK)
    config.attributes["connection"] = connection
    (command.downgrade if down else command.upgrade)(config, revision)


async def migrate(engine: AsyncEngine, revision: str, down: bool = False) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(to_revision, revision, down)


async def fill(engine: AsyncEngine) -> None:
    """Rows of two aggregates in every status the relay leaves behind."""
    rows = [
        {
            "event_id": f"e-{n}",
            "aggregate_type": "Order",
            "aggregate_id": f"order-{n % 2}",
            "event_type": "OrderPaid",
            "topic": "orders",
            "event_key": f"order-{n % 2}",
            "payload": "{}",
            "status": status,
        }
        for n, status in enumerate(STATUSES)
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(outbox_event), rows)


async def definitions(engine: AsyncEngine) -> dict[str, str]:
    async with engine.connect() as conn:
        found = await conn.execute(
            text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'outbox_event'")
        )
        return {name: definition for name, definition in found if name in INDEXES}


async def entries(engine: AsyncEngine) -> dict[str, int]:
    """Entries per index, as counted when the index was built (the migrations build them)."""
    async with engine.connect() as conn:
        found = await conn.execute(
            text("SELECT relname, reltuples FROM pg_class WHERE relname = ANY(:names)"),
            {"names": list(INDEXES)},
        )
        return {name: int(count) for name, count in found}


async def ids(engine: AsyncEngine) -> list[tuple[int, str]]:
    async with engine.connect() as conn:
        found = await conn.execute(text("SELECT id, status FROM outbox_event ORDER BY id"))
        return [(row_id, status) for row_id, status in found]


async def test_published_rows_leave_both_indexes_and_the_claim_still_uses_them(
    make_database: Callable[[str], Awaitable[str]],
) -> None:
    engine = create_engine(await make_database("postgresql"), pool_size=1)
    try:
        await migrate(engine, "0005")
        await fill(engine)
        before = await ids(engine)
        assert all(PARTIAL not in d for d in (await definitions(engine)).values())

        await migrate(engine, "head")

        assert await ids(engine) == before
        found = await definitions(engine)
        assert sorted(found) == sorted(INDEXES)
        assert all(d.endswith(PARTIAL) for d in found.values()), found
        unpublished = len(STATUSES) - STATUSES.count("PUBLISHED")
        assert await entries(engine) == dict.fromkeys(INDEXES, unpublished)

        now = datetime.now(UTC)
        with sent(engine.sync_engine) as statements:
            async with session_factory(engine)() as session, session.begin():
                claimed = await claim(session, "relay-1", now, now + timedelta(minutes=1), 100)
        assert [row["event_id"] for row in claimed] == ["e-6", "e-7", "e-8"]
        reads = [s for s in statements if _reads_by_status_or_aggregate(s[0])]
        plans = await explain(engine, reads)
        assert len(plans) >= 3, statements  # the PROCESSING and PENDING scans, the earlier rows
        for statement, plan in plans:
            assert any(name in plan for name in INDEXES), (statement, plan)

        await migrate(engine, "0005", down=True)

        assert await ids(engine) == [
            (row_id, "PROCESSING" if row_id in {r["id"] for r in claimed} else status)
            for row_id, status in before
        ]
        assert all(PARTIAL not in d for d in (await definitions(engine)).values())
        # Every row again; the build may also count the claimed rows' earlier versions,
        # dead, which the server has not yet found that no snapshot needs.
        counted = await entries(engine)
        assert sorted(counted) == sorted(INDEXES)
        for name, count in counted.items():
            assert len(STATUSES) <= count <= len(STATUSES) + len(claimed), (name, count)
    finally:
        await engine.dispose()


async def test_a_fresh_database_gets_the_partial_indexes(
    make_database: Callable[[str], Awaitable[str]],
) -> None:
    url = await make_database("postgresql")
    await upgrade_to_head(url)
    engine = create_engine(url, pool_size=1)
    try:
        found = await definitions(engine)
        assert sorted(found) == sorted(INDEXES)
        assert all(d.endswith(PARTIAL) for d in found.values()), found
    finally:
        await engine.dispose()


def _reads_by_status_or_aggregate(statement: str) -> bool:
    """A ``SELECT`` of the claim that finds rows by status or by aggregate (not by id)."""
    return statement.lstrip().startswith("SELECT") and (
        "outbox_event.status" in statement and "FOR UPDATE" not in statement
    )


async def explain(engine: AsyncEngine, reads: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """Each statement's generic plan (one for every value of its parameters, as PostgreSQL
    may use for a prepared statement after five runs), with sequential scans off."""
    plans = []
    async with engine.connect() as conn:
        await conn.execute(text("SET plan_cache_mode = force_generic_plan"))
        await conn.execute(text("SET enable_seqscan = off"))
        for n, (statement, parameters) in enumerate(reads):
            await conn.exec_driver_sql(f"PREPARE claim_{n} AS {statement}")
            values = ", ".join(_literal(value) for value in parameters)
            rows = await conn.exec_driver_sql(f"EXPLAIN EXECUTE claim_{n}({values})")
            plans.append((statement, "\n".join(row[0] for row in rows)))
        await conn.rollback()
    return plans


def _literal(value: Any) -> str:
    """``value`` as SQL (the claim's parameters: numbers, texts, times and lists of them)."""
    if isinstance(value, list | tuple):
        return f"ARRAY[{', '.join(_literal(v) for v in value)}]"
    if isinstance(value, int | float):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"
