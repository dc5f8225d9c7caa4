"""The statement helpers take a key of several columns wherever they take one column.

A user's table is often keyed by more than one column (revenue per day and
currency). Contract, on SQLite, PostgreSQL and MariaDB, for a table whose primary
key is ``(day, currency)``: ``add_to_counter`` with the key ``("day", "currency")``
creates each row once and adds to it afterwards; ``upsert`` (on the primary key, or
on a key named with ``key=``) overwrites only the row of its key; ``insert_ignore``
skips rows whose key exists; ``update_rows`` matches rows by both columns;
``rows_where_in`` and ``execute_where_in`` take the key's columns and value tuples and
touch exactly the rows of those tuples (not a row sharing only a day or a currency).
A single column is still passed as a name or a column, as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import date
from decimal import Decimal

import pytest
from sqlalchemy import Column, Date, Integer, MetaData, Numeric, String, Table, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app import (
    add_to_counter,
    execute_where_in,
    insert_ignore,
    rows_where_in,
    update_rows,
    upsert,
)
from app.db.engine import create_engine, session_factory
from tests.integration.support.databases import BACKENDS

pytestmark = pytest.mark.integration

metadata = MetaData()
daily_revenue = Table(
    "daily_revenue",
    metadata,
    Column("day", Date, primary_key=True),
    Column("currency", String(3), primary_key=True),
    Column("amount", Numeric(12, 2), nullable=False),
    Column("orders", Integer, nullable=False, server_default="0"),
    Column("note", String(32), nullable=True),
)

DAY_1 = date(2026, 5, 1)
DAY_2 = date(2026, 5, 2)
KEY = ("day", "currency")


@pytest.fixture(params=BACKENDS)
async def engine(
    request: pytest.FixtureRequest, make_database: Callable[[str], Awaitable[str]]
) -> AsyncIterator[AsyncEngine]:
    """A fresh database of each backend holding ``daily_revenue``."""
    eng = create_engine(await make_database(request.param), pool_size=1)
    async with eng.begin() as conn:
        await conn.run_sync(metadata.create_all)
    yield eng
    await eng.dispose()


async def _stored(session: AsyncSession) -> dict[tuple[date, str], tuple[Decimal, int, str | None]]:
    rows = (await session.execute(select(daily_revenue))).all()
    return {(row.day, row.currency): (row.amount, row.orders, row.note) for row in rows}


def _one_of_each() -> list[dict[str, object]]:
    """A row for each of the two days and each of EUR and USD."""
    days, currencies = (DAY_1, DAY_2), ("EUR", "USD")
    return [_revenue(day, currency, "1.00") for day in days for currency in currencies]


def _revenue(day: date, currency: str, amount: str) -> dict[str, object]:
    return {"day": day, "currency": currency, "amount": Decimal(amount)}


async def test_add_to_counter_adds_per_day_and_currency(engine: AsyncEngine) -> None:
    async with session_factory(engine)() as session, session.begin():
        await add_to_counter(
            session,
            daily_revenue,
            KEY,
            "amount",
            [_revenue(DAY_1, "EUR", "10.50"), _revenue(DAY_1, "USD", "3.00")],
        )
        await add_to_counter(
            session,
            daily_revenue,
            KEY,
            "amount",
            [_revenue(DAY_1, "EUR", "2.25"), _revenue(DAY_2, "EUR", "1.00")],
        )
    async with session_factory(engine)() as session:
        assert await _stored(session) == {
            (DAY_1, "EUR"): (Decimal("12.75"), 0, None),
            (DAY_1, "USD"): (Decimal("3.00"), 0, None),
            (DAY_2, "EUR"): (Decimal("1.00"), 0, None),
        }


async def test_upsert_and_insert_ignore_respect_the_whole_key(engine: AsyncEngine) -> None:
    first = [
        _revenue(DAY_1, "EUR", "1.00") | {"orders": 1},
        _revenue(DAY_1, "USD", "2.00") | {"orders": 0},
    ]
    async with session_factory(engine)() as session, session.begin():
        await insert_ignore(session, daily_revenue, first)
        await insert_ignore(session, daily_revenue, [_revenue(DAY_1, "EUR", "9.00")])
        await upsert(session, daily_revenue, [_revenue(DAY_1, "USD", "5.00")], ["amount"])
        await upsert(session, daily_revenue, [_revenue(DAY_2, "USD", "7.00")], ["amount"], key=KEY)
        await upsert(session, daily_revenue, [_revenue(DAY_2, "USD", "8.00")], ["amount"], key=KEY)
    async with session_factory(engine)() as session:
        assert await _stored(session) == {
            (DAY_1, "EUR"): (Decimal("1.00"), 1, None),
            (DAY_1, "USD"): (Decimal("5.00"), 0, None),
            (DAY_2, "USD"): (Decimal("8.00"), 0, None),
        }


async def test_update_rows_matches_both_columns(engine: AsyncEngine) -> None:
    rows = _one_of_each()
    async with session_factory(engine)() as session, session.begin():
        await insert_ignore(session, daily_revenue, rows)
        await update_rows(
            session,
            daily_revenue,
            KEY,
            [{"day": DAY_1, "currency": "USD", "orders": 4}],
            note="checked",
        )
    async with session_factory(engine)() as session:
        assert await _stored(session) == {
            (DAY_1, "EUR"): (Decimal("1.00"), 0, None),
            (DAY_1, "USD"): (Decimal("1.00"), 4, "checked"),
            (DAY_2, "EUR"): (Decimal("1.00"), 0, None),
            (DAY_2, "USD"): (Decimal("1.00"), 0, None),
        }


async def test_lookups_by_key_tuples_touch_exactly_those_rows(engine: AsyncEngine) -> None:
    rows = _one_of_each()
    key_columns = (daily_revenue.c.day, daily_revenue.c.currency)
    wanted = [(DAY_1, "USD"), (DAY_2, "EUR"), (DAY_2, "GBP")]
    async with session_factory(engine)() as session, session.begin():
        await insert_ignore(session, daily_revenue, rows)
        found = await rows_where_in(session, select(daily_revenue), key_columns, wanted)
        assert sorted((row.day, row.currency) for row in found) == [(DAY_1, "USD"), (DAY_2, "EUR")]
        assert await rows_where_in(session, select(daily_revenue), key_columns, []) == []
        await execute_where_in(session, delete(daily_revenue), key_columns, wanted)
    async with session_factory(engine)() as session:
        assert sorted(await _stored(session)) == [(DAY_1, "EUR"), (DAY_2, "USD")]


async def test_a_single_key_column_is_still_one_name(engine: AsyncEngine) -> None:
    async with session_factory(engine)() as session, session.begin():
        await insert_ignore(session, daily_revenue, [_revenue(DAY_1, "EUR", "1.00")])
        await update_rows(session, daily_revenue, "currency", [{"currency": "EUR", "orders": 2}])
        found = await rows_where_in(
            session, select(daily_revenue), daily_revenue.c.currency, ["EUR"]
        )
    assert [(row.day, row.orders) for row in found] == [(DAY_1, 2)]
