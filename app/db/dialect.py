"""The few statements whose SQL differs between PostgreSQL, MySQL/MariaDB and SQLite."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVarTuple

from sqlalchemy import (
    ColumnElement,
    Delete,
    Row,
    Select,
    Table,
    Update,
    bindparam,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import Insert

from app.db import bulk

_Ts = TypeVarTuple("_Ts")


def backend(session: AsyncSession) -> str:
    """``postgresql``, ``mysql`` or ``sqlite`` for the session's bind."""
    return session.get_bind().dialect.name


def insert_ignore_stmt(dialect: str, table: Table) -> Insert:
    """An INSERT that skips rows whose primary key already exists."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    if dialect in ("mysql", "mariadb"):
        return mysql.insert(table).prefix_with("IGNORE")
    raise ValueError(f"unsupported database dialect {dialect!r}")


async def insert_ignore(
    session: AsyncSession, table: Table, rows: Sequence[dict[str, Any]]
) -> None:
    """Insert ``rows``, skipping those whose key exists (one statement)."""
    await _insert_many(
        session, table, rows, bulk.IGNORE, lambda dialect: insert_ignore_stmt(dialect, table)
    )


async def insert_rows(session: AsyncSession, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (every one with the same keys) in one statement; a duplicate key raises."""
    await _insert_many(session, table, rows, bulk.PLAIN, lambda _: table.insert())


async def _insert_many(
    session: AsyncSession,
    table: Table,
    rows: Sequence[dict[str, Any]],
    conflict: tuple[str, ...],
    executemany: Callable[[str], Insert],
) -> None:
    """``rows`` in one ``bulk.insert`` on PostgreSQL; elsewhere ``executemany(dialect)`` per row."""
    if not rows:
        return
    dialect = backend(session)
    if dialect == "postgresql":
        stmt = bulk.insert(table, bulk.columns_of(rows), conflict)
        await session.execute(stmt, bulk.params(table, rows))
    else:
        await session.execute(executemany(dialect), list(rows))


async def update_rows(
    session: AsyncSession,
    table: Table,
    keys: Sequence[str],
    rows: Sequence[dict[str, Any]],
    **constants: Any,
) -> None:
    """For each row, set its other columns (and ``constants``) where its ``keys`` columns match.

    Every row has the same columns. One statement on PostgreSQL (``UPDATE ... FROM
    unnest``), an executemany elsewhere.
    """
    if not rows:
        return
    columns = bulk.columns_of(rows)
    options = {"synchronize_session": False}
    if backend(session) == "postgresql":
        stmt = bulk.update_from(table, columns, tuple(keys), tuple(constants))
        one = bulk.params(table, rows) | bulk.constant_params(constants)
        await session.execute(stmt, one, execution_options=options)
        return
    changed = [name for name in columns if name not in keys]
    stmt = (
        update(table)
        .where(*(table.c[name] == bindparam(f"b_{name}") for name in keys))
        .values({**{name: bindparam(f"b_{name}") for name in changed}, **constants})
    )
    params = [{f"b_{name}": row[name] for name in columns} for row in rows]
    await session.execute(stmt, params, execution_options=options)


def add_on_conflict_stmt(dialect: str, table: Table, key: str, column: str) -> Insert:
    """INSERT a row, or add its ``column`` value to the existing row's (an atomic counter)."""
    if dialect in ("postgresql", "sqlite"):
        ins = (postgresql if dialect == "postgresql" else sqlite).insert(table)
        return ins.on_conflict_do_update(
            index_elements=[key],
            set_={column: table.c[column] + ins.excluded[column]},
        )
    if dialect in ("mysql", "mariadb"):
        my = mysql.insert(table)
        return my.on_duplicate_key_update({column: table.c[column] + my.inserted[column]})
    raise ValueError(f"unsupported database dialect {dialect!r}")


async def add_to_counter(
    session: AsyncSession, table: Table, key: str, column: str, rows: Sequence[dict[str, Any]]
) -> None:
    """For each row, create it or add its ``column`` to the stored value."""
    await _insert_many(
        session,
        table,
        rows,
        ("add", key, column),
        lambda dialect: add_on_conflict_stmt(dialect, table, key, column),
    )


IN_LIST_SIZE = 500
"""Values per ``IN (...)`` list: SQLite builds older than 3.32 accept 999 bound parameters."""

ARRAY_LIST_SIZE = 50_000
"""Values per PostgreSQL ``= ANY(array)``: one parameter, so only memory bounds it."""


def list_size(dialect: str) -> int:
    """How many values one lookup of ``one_of`` takes on ``dialect``."""
    return ARRAY_LIST_SIZE if dialect == "postgresql" else IN_LIST_SIZE


def in_lists(values: Iterable[str], size: int = IN_LIST_SIZE) -> list[list[str]]:
    """The distinct ``values``, sorted, cut into lists of at most ``size`` for ``IN (...)``.

    Sorted so that statements locking the matching rows lock them in one order.
    """
    distinct = sorted(set(values))
    return [distinct[i : i + size] for i in range(0, len(distinct), size)]


def one_of(
    dialect: str, column: ColumnElement[Any], values: Sequence[str] | Sequence[int]
) -> ColumnElement[bool]:
    """``column`` is one of ``values``.

    PostgreSQL gets ``column = ANY($1)`` with one array parameter: one statement text
    (so one prepared statement) whatever the count, and no per-value bind to render.
    The others get ``IN (...)``.
    """
    if dialect == "postgresql":
        return bulk.any_of(column, values)
    return column.in_(values)


async def rows_where_in(
    session: AsyncSession,
    stmt: Select[*_Ts],
    column: ColumnElement[Any],
    values: Iterable[str],
) -> list[Row[*_Ts]]:
    """The rows of ``stmt`` whose ``column`` is one of ``values`` (one SELECT per ``in_lists``)."""
    rows: list[Row[*_Ts]] = []
    dialect = backend(session)
    for chunk in in_lists(values, list_size(dialect)):
        rows.extend((await session.execute(stmt.where(one_of(dialect, column, chunk)))).all())
    return rows


async def execute_where_in(
    session: AsyncSession,
    stmt: Update | Delete,
    column: ColumnElement[Any],
    values: Iterable[str],
) -> None:
    """Run the UPDATE or DELETE ``stmt`` on the rows whose ``column`` is one of ``values``."""
    dialect = backend(session)
    for chunk in in_lists(values, list_size(dialect)):
        await session.execute(stmt.where(one_of(dialect, column, chunk)))


def upsert_stmt(dialect: str, table: Table, update_columns: Sequence[str]) -> Insert:
    """INSERT a row, or overwrite ``update_columns`` of the row with the same primary key."""
    keys = [column.name for column in table.primary_key.columns]
    if dialect in ("postgresql", "sqlite"):
        ins = (postgresql if dialect == "postgresql" else sqlite).insert(table)
        return ins.on_conflict_do_update(
            index_elements=keys, set_={name: ins.excluded[name] for name in update_columns}
        )
    if dialect in ("mysql", "mariadb"):
        my = mysql.insert(table)
        return my.on_duplicate_key_update({name: my.inserted[name] for name in update_columns})
    raise ValueError(f"unsupported database dialect {dialect!r}")


async def upsert(
    session: AsyncSession,
    table: Table,
    rows: Sequence[dict[str, Any]],
    update_columns: Sequence[str],
) -> None:
    """Insert ``rows`` or overwrite ``update_columns`` where the key exists (one statement)."""
    await _insert_many(
        session,
        table,
        rows,
        ("overwrite", *update_columns),
        lambda dialect: upsert_stmt(dialect, table, update_columns),
    )
