"""``python -m app outbox``: list, show and re-queue outbox rows (by default the ``DEAD`` ones).

Reads ``DATABASE_URL`` (or ``--database-url``). ``requeue`` only says what it would do
unless given ``--execute``. Exit codes: 0 done, 1 nothing matched, 2 a usage error or an
unreachable database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Annotated, Any, NoReturn, TypeVar

import orjson
import typer
from pydantic import ValidationError
from rich.table import Table
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.cli_run import error_console, labelled, output_console
from app.db.engine import create_engine
from app.db.said import driver_said
from app.db.urls import missing_sqlite_file, normalise_database_url, shown
from app.outbox import dead
from app.outbox.status import OutboxStatus
from app.settings import Settings, describe

T = TypeVar("T")
# Ids listed on a line of output; the rest are counted.
SHOWN_IDS = 20
# Column names come back as SQLAlchemy's str subclass, which orjson takes only when told.
_JSON = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
outbox = typer.Typer(
    help="List, show and re-queue outbox rows (DEAD ones: the relay gave up on them).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = error_console()

DatabaseUrl = Annotated[str | None, typer.Option(help="Database to read (default: DATABASE_URL).")]
Json = Annotated[bool, typer.Option("--json", help="JSON instead of a table.")]


def register(cli: typer.Typer) -> None:
    """Add the ``outbox`` commands to ``cli``."""
    cli.add_typer(outbox, name="outbox")


def _statuses(values: list[str] | None) -> list[str]:
    known = {status.value for status in OutboxStatus}
    chosen = [value.upper() for value in values or [OutboxStatus.DEAD.value]]
    for value in chosen:
        if value not in known:
            raise typer.BadParameter(f"{value!r} is none of {', '.join(sorted(known))}")
    return chosen


@outbox.command("list")
def list_(
    status: Annotated[
        list[str] | None,
        typer.Option(help="Rows in this status (repeatable; default DEAD).", callback=_statuses),
    ] = None,
    topic: Annotated[str | None, typer.Option(help="Only rows for this topic.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many.")] = None,
    as_json: Json = False,
    database_url: DatabaseUrl = None,
) -> None:
    """List rows, oldest first, with their attempts and last error."""
    statuses = status or [OutboxStatus.DEAD.value]
    rows = _run(database_url, lambda conn: dead.list_rows(conn, statuses, topic, limit))
    if as_json:
        typer.echo(orjson.dumps(rows, default=_json, option=_JSON))
    else:
        output_console().print(_table(rows, f"outbox rows {', '.join(statuses)}: {len(rows)}"))
    if not rows:
        raise typer.Exit(1)


@outbox.command()
def show(
    row_id: Annotated[int | None, typer.Argument(help="The row's id.", show_default=False)] = None,
    event_id: Annotated[str | None, typer.Option(help="The row with this event_id.")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Every column of one row (payload and headers included)."""
    if (row_id is None) == (event_id is None):
        raise typer.BadParameter("name one row: its id, or --event-id")
    row = _run(database_url, lambda conn: dead.one_row(conn, row_id, event_id))
    if row is None:
        err.print(f"no outbox row {row_id if row_id is not None else event_id}")
        raise typer.Exit(1)
    typer.echo(orjson.dumps(row, default=_json, option=_JSON))


@outbox.command()
def requeue(
    row_ids: Annotated[
        list[int] | None, typer.Argument(help="Ids of DEAD rows.", show_default=False)
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every DEAD row (of --topic).")] = False,
    topic: Annotated[str | None, typer.Option(help="With --all: only this topic.")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Act (default: a dry run).")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Put DEAD rows back to PENDING, attempts counted afresh (fix their cause first)."""
    if bool(row_ids) == every:
        said = "not both" if every else "one of them"
        raise typer.BadParameter(f"name the rows (their ids) or give --all, {said}")

    async def act(conn: AsyncConnection) -> tuple[list[int], list[int], set[int]]:
        chosen = list(row_ids or [])
        if every:
            chosen = [row["id"] for row in await dead.list_rows(conn, topic=topic)]
        present = await dead.existing(conn, chosen)
        if not execute:
            dead_ids = await dead.in_status(conn, chosen, OutboxStatus.DEAD)
            return chosen, [row_id for row_id in chosen if row_id in dead_ids], present
        return chosen, await dead.requeue(conn, chosen), present

    chosen, done, present = _run(database_url, act, write=True)
    verb = "re-queued" if execute else "would re-queue"
    _report(verb, chosen, done, present, "not DEAD", execute)


@outbox.command(name="give-up")
def give_up(
    row_ids: Annotated[list[int], typer.Argument(help="Ids of PENDING rows.", show_default=False)],
    why: Annotated[str, typer.Option("--why", help="Why they will never go (kept in last_error).")],
    execute: Annotated[bool, typer.Option("--execute", help="Act (default: a dry run).")] = False,
    held: Annotated[
        bool,
        typer.Option(
            "--held",
            help="PROCESSING rows too: a relay holds them (waiting in place on a write its ACLs "
            "deny); it learns at its next lease renewal. A record on its way may still go.",
        ),
    ] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Mark PENDING rows DEAD now (a row that will never go holds its aggregate's later rows
    through all its attempts); requeue undoes it."""
    if not why.strip():
        raise typer.BadParameter("say why they will never go", param_hint="--why")

    async def act(conn: AsyncConnection) -> tuple[list[int], set[int]]:
        present = await dead.existing(conn, row_ids)
        if not execute:
            pending = await dead.in_status(conn, row_ids, OutboxStatus.PENDING)
            if held:
                pending |= await dead.in_status(conn, row_ids, OutboxStatus.PROCESSING)
            return [row_id for row_id in row_ids if row_id in pending], present
        return await dead.give_up(conn, row_ids, why.strip(), held), present

    done, present = _run(database_url, act, write=True)
    verb = "gave up" if execute else "would give up"
    other = (
        "published or dead already"
        if held
        else "not PENDING: a relay holds it (--held gives it up anyway), or it went"
    )
    _report(verb, row_ids, done, present, other, execute)


def _report(
    verb: str, chosen: list[int], done: list[int], present: set[int], other: str, execute: bool
) -> None:
    """What a write did (or would do) to ``chosen``: ``done``, the rows left alone (in
    ``other`` status), the ids that are no row; exit code 1 when it did nothing."""
    output_console().print(f"{verb} {len(done)} of {len(chosen)} row(s): {_ids(done)}")
    left = sorted(present - set(done))
    if left:
        output_console().print(f"left alone ({other}): {_ids(left)}")
    missing = sorted(set(chosen) - present)
    if missing:
        err.print(f"no outbox row {_ids(missing)}")
    if not execute and done:
        output_console().print("dry run: nothing changed (add --execute)")
    if not done:
        raise typer.Exit(1)


def _run(
    option: str | None, work: Callable[[AsyncConnection], Awaitable[T]], write: bool = False
) -> T:
    try:
        url = normalise_database_url(option) if option else Settings().database_url
    except ValidationError as exc:
        _fail("invalid settings:\n" + "\n".join(f"  {line}" for line in describe(exc)))
    except ValueError as exc:
        _fail(f"--database-url is not usable: {exc}")
    if missing := missing_sqlite_file(url):
        _fail(f"no SQLite database at {missing}")

    async def go() -> T:
        engine = create_engine(url, pool_size=1)
        try:
            async with engine.begin() if write else engine.connect() as conn:
                return await work(conn)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(go())
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        where = shown(url)
        _fail(f"cannot read the outbox at {where}: {driver_said(exc)}")


def _ids(ids: Sequence[int]) -> str:
    """``ids`` for a line of output: the first ``SHOWN_IDS`` of them, and how many more."""
    shown_ids = ", ".join(map(str, ids[:SHOWN_IDS])) or "-"
    more = len(ids) - SHOWN_IDS
    return f"{shown_ids} and {more:,} more" if more > 0 else shown_ids


def _fail(message: str) -> NoReturn:
    err.print(labelled("effectively-once outbox:", message))
    raise typer.Exit(2)


def _table(rows: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("id", "event id", "aggregate", "type", "topic", "status", "tries", "last error"):
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(
            str(row["id"]),
            row["event_id"],
            f"{row['aggregate_type']} {row['aggregate_id']}",
            row["event_type"],
            row["topic"],
            row["status"],
            str(row["retry_count"]),
            (row["last_error"] or "")[:200],
        )
    return table


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    raise TypeError(type(value).__name__)
