"""Many rows in one statement, on PostgreSQL.

A batch's rows travel as one parameter and come back out as a row source: one
statement, one prepared plan and one execution whatever the row count, instead
of an executemany that binds and runs the statement once per row. The rows go
as one JSON text read by ``json_populate_recordset`` (typed by the table's own
row type), which costs the worker one ``orjson.dumps``; a table with binary
columns (JSON has no bytes) gets one array parameter per column and ``unnest``.
The statements are built once per table and column set and cached; a call only
serialises the rows. ``app.db.dialect`` uses them on PostgreSQL and an
executemany on the other databases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from functools import cache
from typing import Any

import orjson
from sqlalchemy import (
    ColumnElement,
    LargeBinary,
    Select,
    String,
    Table,
    Update,
    any_,
    bindparam,
    cast,
    column,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import Insert
from sqlalchemy.sql import TableValuedAlias, func

Rows = Sequence[Mapping[str, Any]]
Params = dict[str, Any]

PLAIN = ("plain",)
IGNORE = ("ignore",)


def params(table: Table, rows: Rows, prefix: str = "u") -> Params:
    """The parameters that carry ``rows`` (every row with the same keys) into ``table``;
    ``prefix``: the one the statement's row source was built with (``insert``)."""
    if _as_json(table):
        text = orjson.dumps(list(rows), default=_decimal, option=_NAIVE_UTC).decode()
        return {f"{prefix}_rows": text}
    return {f"{prefix}_{name}": [row[name] for row in rows] for name in rows[0]}


def columns_of(rows: Rows) -> tuple[str, ...]:
    """The column names of ``rows``, in the first row's order."""
    return tuple(rows[0])


@cache
def insert(
    table: Table, columns: tuple[str, ...], conflict: tuple[Any, ...] = PLAIN, prefix: str = "u"
) -> Insert:
    """``INSERT INTO table (columns) SELECT columns FROM <the rows>``.

    ``conflict``: ``PLAIN`` (a duplicate key raises), ``IGNORE`` (skip it),
    ``("add", keys, column)`` (add the new value to the stored one) or
    ``("overwrite", keys, columns)`` (replace those columns of the stored row), where
    ``keys`` is the tuple of the conflicting key's column names. ``prefix``: of the
    parameters' names (``params``), distinct for each of the statements ``together`` joins.
    """
    source = _rows(table, columns, prefix=prefix)
    stmt = postgresql.insert(table).from_select(list(columns), select(*source.c))
    kind, *args = conflict
    if kind == "ignore":
        return stmt.on_conflict_do_nothing()
    if kind == "add":
        keys, column = args
        return stmt.on_conflict_do_update(
            index_elements=list(keys), set_={column: table.c[column] + stmt.excluded[column]}
        )
    if kind == "overwrite":
        keys, changed = args
        return stmt.on_conflict_do_update(
            index_elements=list(keys), set_={name: stmt.excluded[name] for name in changed}
        )
    return stmt


@cache
def update_from(
    table: Table,
    columns: tuple[str, ...],
    keys: tuple[str, ...],
    constants: tuple[str, ...] = (),
    if_unchanged: bool = False,
    prefix: str = "u",
) -> Update:
    """``UPDATE table SET <other columns> FROM <the rows> WHERE <keys> match``.

    ``constants`` are columns set to one value for every row, bound as ``c_<column>``
    (``constant_params``), so that the statement stays the cached one.

    ``if_unchanged``: only the rows that no other transaction wrote since they were
    read. Each row then carries, besides ``columns``, ``seen``: the ``xmin`` its reader
    saw (``xmin_text``), the transaction that last wrote that row version. A row
    written since has another ``xmin`` and is left as it is; the caller compares the
    row count. Under READ COMMITTED a row that a concurrent transaction holds is
    waited for, then checked as that transaction left it. ``prefix``: as ``insert``'s.
    """
    source = _rows(table, columns, extra=(SEEN,) if if_unchanged else (), prefix=prefix)
    unchanged = [xmin_text(table) == source.c[SEEN]] if if_unchanged else []
    return (
        update(table)
        .where(*(table.c[name] == source.c[name] for name in keys), *unchanged)
        .values(
            {name: source.c[name] for name in columns if name not in keys}
            | {name: bindparam(f"c_{name}", type_=table.c[name].type) for name in constants}
        )
    )


SEEN = "seen"


Inserted = tuple[Table, tuple[str, ...], str]
"""An insert of ``together``: the table, its columns, and its parameters' prefix."""


@cache
def together(counted: Update, *inserts: Inserted) -> Select[Any]:
    """One statement that runs ``counted``, then each of ``inserts`` in their order (as
    data-modifying ``WITH`` queries, on one snapshot), and returns how many rows
    ``counted`` wrote: one round trip and one execution instead of one per statement.

    The order is a data dependency, not the order the queries are written in (which the
    server does not keep for queries nothing reads): each insert reads its rows only
    after counting the rows the step before it returned, so that step has run to its end.
    So the rows are locked in the order the statements were once sent in, and two
    writers meet on the first row they share. Each insert's parameters carry its prefix
    (``params``). A step that fails (a duplicate key) fails the whole statement, and
    nothing of it is written.
    """
    updated = counted.returning(literal_column("1")).cte("step_0")
    previous = updated
    for number, (table, columns, prefix) in enumerate(inserts, 1):
        source = _rows(table, columns, prefix=prefix)
        ran = select(func.count()).select_from(previous).scalar_subquery()
        rows = select(*source.c).where(ran >= literal_column("0"))
        step = postgresql.insert(table).from_select(list(columns), rows)
        previous = step.returning(literal_column("1")).cte(f"step_{number}")
    last = select(func.count()).select_from(previous).scalar_subquery()
    return select(select(func.count()).select_from(updated).scalar_subquery(), last)


def xmin_text(table: Table) -> ColumnElement[str]:
    """``table.xmin`` as text: which transaction wrote the row version read."""
    return cast(literal_column(f'"{table.name}".xmin'), String)


def constant_params(constants: Mapping[str, Any]) -> Params:
    """The parameters of ``update_from``'s ``constants``."""
    return {f"c_{name}": value for name, value in constants.items()}


def any_of(
    column: ColumnElement[Any], values: Sequence[str] | Sequence[int]
) -> ColumnElement[bool]:
    """``column = ANY(...)``: one parameter and one statement text for any count.

    The values go as one text, joined by the unit separator (U+001F) and split by
    ``string_to_array``. PostgreSQL plans each run for its parameters (see
    ``app.db.engine``), folds the split into a constant array and so plans exactly
    as for an array parameter: with the values in hand, matching a scanned table's
    rows through a hash (an array built from rows inside the statement, say from a
    JSON text, compares each row with every value: a few thousand ids went from
    milliseconds to a second). One text costs the worker a join where an array
    parameter costs asyncpg two abstract-class checks per value, about half a
    millisecond per 500 ids. Values the split could not give back (not text, empty,
    holding the separator) go as an array parameter.
    """
    listed: list[Any] = list(values)
    if isinstance(column.type, String) and all(
        type(value) is str and value and _SEPARATOR not in value for value in listed
    ):
        joined = bindparam(None, _SEPARATOR.join(listed), type_=String())
        return column == any_(func.string_to_array(joined, _SPLIT_ON))
    array = bindparam(None, listed, type_=postgresql.ARRAY(column.type))
    return column == any_(array)


_SEPARATOR = "\x1f"
_SPLIT_ON: ColumnElement[str] = literal_column("E'\\x1f'")


_NAIVE_UTC = orjson.OPT_NAIVE_UTC  # a naive datetime counts as UTC (ours are all aware)


def _decimal(value: Any) -> str:
    """JSON for what orjson leaves out: a ``Decimal`` as its exact text; anything else raises."""
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot send {type(value).__name__} as JSON: {value!r}")


@cache
def _as_json(table: Table) -> bool:
    return not any(isinstance(column.type, LargeBinary) for column in table.columns)


def _rows(
    table: Table, columns: tuple[str, ...], extra: tuple[str, ...] = (), prefix: str = "u"
) -> TableValuedAlias:
    """The row source of ``columns``: ``json_populate_recordset`` or ``unnest``; with
    ``extra`` text fields that are no column of ``table``, ``json_to_recordset``. Its
    parameters are named ``<prefix>_rows`` (JSON) or ``<prefix>_<column>`` (arrays)."""
    if extra:
        text = cast(bindparam(f"{prefix}_rows", type_=String), postgresql.JSON)
        fields = [column(name, table.c[name].type) for name in columns]
        fields += [column(name, String) for name in extra]
        return func.json_to_recordset(text).table_valued(*fields).render_derived(with_types=True)
    if _as_json(table):
        name = ".".join(f'"{part}"' for part in (table.schema, table.name) if part)
        row_type: ColumnElement[Any] = literal_column(f"NULL::{name}")
        text = cast(bindparam(f"{prefix}_rows", type_=String), postgresql.JSON)
        return func.json_populate_recordset(row_type, text).table_valued(*columns)
    arrays = [
        bindparam(f"{prefix}_{name}", type_=postgresql.ARRAY(table.c[name].type))
        for name in columns
    ]
    return func.unnest(*arrays).table_valued(*columns).render_derived()
