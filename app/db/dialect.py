"""The few statements whose SQL differs between PostgreSQL, MySQL/MariaDB and SQLite.

A key is one column name or a sequence of them (``"sku"``, ``("day", "currency")``);
a lookup takes one column and its values, or a sequence of columns and value tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias, TypeVarTuple

from sqlalchemy import (
    ColumnElement,
    Delete,
    Row,
    Select,
    Table,
    Update,
    bindparam,
    func,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import Insert

from app.db import bulk

_Ts = TypeVarTuple("_Ts")

Key: TypeAlias = str | Sequence[str]
"""The columns that identify a row: one name, or a sequence of names."""

KeyColumns: TypeAlias = ColumnElement[Any] | Sequence[ColumnElement[Any]]
"""The columns a lookup matches: one column, or a sequence of columns (then values are tuples)."""


def key_names(key: Key) -> tuple[str, ...]:
    """``key`` as a tuple of column names (a lone name is not split into its letters)."""
    return (key,) if isinstance(key, str) else tuple(key)


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
    conflict: tuple[Any, ...],
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
    keys: Key,
    rows: Sequence[dict[str, Any]],
    **constants: Any,
) -> None:
    """For each row, set its other columns (and ``constants``) where its ``keys`` columns match.

    ``keys``: one column name or several. Every row has the same columns. One statement
    on PostgreSQL (``UPDATE ... FROM unnest``), an executemany elsewhere.
    """
    if not rows:
        return
    keys = key_names(keys)
    columns = bulk.columns_of(rows)
    options = {"synchronize_session": False}
    if backend(session) == "postgresql":
        stmt = bulk.update_from(table, columns, keys, tuple(constants))
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


def add_on_conflict_stmt(dialect: str, table: Table, key: Key, column: str) -> Insert:
    """INSERT a row, or add its ``column`` value to the existing row's (an atomic counter)."""
    if dialect in ("postgresql", "sqlite"):
        ins = (postgresql if dialect == "postgresql" else sqlite).insert(table)
        return ins.on_conflict_do_update(
            index_elements=list(key_names(key)),
            set_={column: table.c[column] + ins.excluded[column]},
        )
    if dialect in ("mysql", "mariadb"):
        my = mysql.insert(table)
        return my.on_duplicate_key_update({column: table.c[column] + my.inserted[column]})
    raise ValueError(f"unsupported database dialect {dialect!r}")


async def add_to_counter(
    session: AsyncSession, table: Table, key: Key, column: str, rows: Sequence[dict[str, Any]]
) -> None:
    """For each row, create it or add its ``column`` to the stored value.

    ``key``: the column, or the columns (``("day", "currency")``), of the primary key or
    unique constraint that identifies a row; MySQL/MariaDB use whichever unique key the
    row collides with.
    """
    keys = key_names(key)
    await _insert_many(
        session,
        table,
        rows,
        ("add", keys, column),
        lambda dialect: add_on_conflict_stmt(dialect, table, keys, column),
    )


IN_LIST_SIZE = 500
"""Values per ``IN (...)`` list: SQLite builds older than 3.32 accept 999 bound parameters."""

ARRAY_LIST_SIZE = 50_000
"""Values per PostgreSQL ``= ANY(array)``: one parameter, so only memory bounds it."""


def list_size(dialect: str) -> int:
    """How many values one lookup of ``one_of`` takes on ``dialect``."""
    return ARRAY_LIST_SIZE if dialect == "postgresql" else IN_LIST_SIZE


def in_lists(values: Iterable[Any], size: int = IN_LIST_SIZE) -> list[list[Any]]:
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


def key_in(dialect: str, columns: KeyColumns, values: Sequence[Any]) -> ColumnElement[bool]:
    """``columns`` hold one of ``values``: ``one_of`` for one column; for several, the
    row value ``(a, b) IN ...`` of value tuples (on PostgreSQL from one array per column,
    unnested, so that the statement text stays the same whatever the count)."""
    if isinstance(columns, ColumnElement):
        return one_of(dialect, columns, values)
    columns = list(columns)
    if dialect != "postgresql":
        return tuple_(*columns).in_(values)
    arrays = [
        bindparam(None, [value[i] for value in values], type_=postgresql.ARRAY(column.type))
        for i, column in enumerate(columns)
    ]
    names = [f"k{i}" for i in range(len(columns))]
    source = func.unnest(*arrays).table_valued(*names).render_derived()
    return tuple_(*columns).in_(select(*source.c))


def _lookup_values(columns: KeyColumns, values: Iterable[Any]) -> tuple[list[Any], int]:
    """``values`` as ``key_in`` takes them (tuples for several columns) and their width."""
    listed = list(values)
    if isinstance(columns, ColumnElement):
        return listed, 1
    width = len(columns)
    if not all(isinstance(value, tuple | list) and len(value) == width for value in listed):
        raise ValueError(f"each value must be a tuple of {width} values, one per column")
    return [tuple(value) for value in listed], width


async def rows_where_in(
    session: AsyncSession,
    stmt: Select[*_Ts],
    column: KeyColumns,
    values: Iterable[Any],
) -> list[Row[*_Ts]]:
    """The rows of ``stmt`` whose ``column`` is one of ``values`` (one SELECT per ``in_lists``).

    ``column`` may be a sequence of columns; ``values`` are then tuples, one value per
    column: ``rows_where_in(session, stmt, (t.c.day, t.c.currency), [(day, "EUR")])``.
    """
    rows: list[Row[*_Ts]] = []
    dialect = backend(session)
    listed, width = _lookup_values(column, values)
    for chunk in in_lists(listed, list_size(dialect) // width):
        rows.extend((await session.execute(stmt.where(key_in(dialect, column, chunk)))).all())
    return rows


async def execute_where_in(
    session: AsyncSession,
    stmt: Update | Delete,
    column: KeyColumns,
    values: Iterable[Any],
) -> None:
    """Run the UPDATE or DELETE ``stmt`` on the rows whose ``column`` is one of ``values``.

    ``column`` may be a sequence of columns, ``values`` then tuples (as ``rows_where_in``).
    """
    dialect = backend(session)
    listed, width = _lookup_values(column, values)
    for chunk in in_lists(listed, list_size(dialect) // width):
        await session.execute(stmt.where(key_in(dialect, column, chunk)))


def upsert_stmt(
    dialect: str, table: Table, update_columns: Sequence[str], key: Key | None = None
) -> Insert:
    """INSERT a row, or overwrite ``update_columns`` of the row with the same ``key``
    (by default the primary key)."""
    keys = list(_upsert_key(table, key))
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
    *,
    key: Key | None = None,
) -> None:
    """Insert ``rows`` or overwrite ``update_columns`` where the key exists (one statement).

    ``key``: the column, or columns, of the primary key or unique constraint the rows
    conflict on; by default the primary key (MySQL/MariaDB: any unique key).
    """
    keys = _upsert_key(table, key)
    changed = tuple(update_columns)
    await _insert_many(
        session,
        table,
        rows,
        ("overwrite", keys, changed),
        lambda dialect: upsert_stmt(dialect, table, changed, keys),
    )


def _upsert_key(table: Table, key: Key | None) -> tuple[str, ...]:
    if key is None:
        return tuple(column.name for column in table.primary_key.columns)
    return key_names(key)
