"""A lookup by a list of ids finds exactly the rows of those ids, whatever the ids hold.

On PostgreSQL the ids of a text column travel as one text, joined by the unit
separator and split again by the server (cheaper for the worker than an array
parameter); ids the split could not give back (one holding the separator, an
empty one) and columns that are not text go as an array. Contract, on every
backend: ``rows_where_in`` returns the rows whose column is one of the values
and no other, for ids with commas, braces, quotes, backslashes, spaces and
non-ASCII letters, a list holding an id with the separator, an empty id, an
empty list, and an integer column.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.db.dialect import rows_where_in
from app.db.engine import create_engine, session_factory

pytestmark = pytest.mark.integration

APPLIED_AT = datetime(2026, 1, 1, tzinfo=UTC)
AWKWARD = [
    "plain",
    "a,b",
    "{braced}",
    '"quoted"',
    "back\\slash",
    "with space",
    "NULL",
    "größe-ünïcode",
    "tab\tinside",
]
SEPARATED = "unit\x1fseparator"


@pytest.fixture(params=["postgresql", "mariadb", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(database_url, pool_size=1)
    async with eng.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
        rows = [_row(event_id, offset) for offset, event_id in enumerate([*AWKWARD, SEPARATED])]
        await conn.execute(insert(tables.consumed_event), [*rows, _row("", len(rows))])
    yield eng
    await eng.dispose()


async def _event_ids(engine: AsyncEngine, wanted: list[str]) -> list[str]:
    column = tables.consumed_event.c.event_id
    async with session_factory(engine)() as session:
        rows = await rows_where_in(session, select(column), column, wanted)
    return sorted(row.event_id for row in rows)


async def test_ids_of_any_text_are_found_and_nothing_else(engine: AsyncEngine) -> None:
    assert await _event_ids(engine, [*AWKWARD, "missing", "a", "b"]) == sorted(AWKWARD)
    assert await _event_ids(engine, ["a,b"]) == ["a,b"]


async def test_ids_the_split_could_not_give_back_are_found_too(engine: AsyncEngine) -> None:
    assert await _event_ids(engine, ["plain", SEPARATED]) == sorted(["plain", SEPARATED])
    assert await _event_ids(engine, ["", "plain"]) == ["", "plain"]
    assert await _event_ids(engine, []) == []


async def test_an_integer_column_is_looked_up_by_its_values(engine: AsyncEngine) -> None:
    offset = tables.consumed_event.c.aggregate_version
    async with session_factory(engine)() as session:
        rows = await rows_where_in(session, select(offset), offset, [1, 3, 99])
    assert sorted(row.aggregate_version for row in rows) == [1, 3]


def _row(event_id: str, version: int) -> dict[str, object]:
    return {
        "consumer_group": "points-service",
        "event_id": event_id,
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": f"o-{version}",
        "aggregate_version": version,
        "applied_at": APPLIED_AT,
    }
