"""``python -m app trace <eventId>``: print what each consumer did with one event, and
where its outbox rows are (written, published, dead).

Reads ``DATABASE_URL`` (or ``--database-url``). Exit codes: 0 found, 1 no
consumer has a record of the event, 2 the database cannot be read.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

import orjson
import typer
from pydantic import ValidationError
from rich.table import Table
from sqlalchemy.exc import SQLAlchemyError

from app.cli_run import error_console, labelled, output_console
from app.db.engine import create_engine
from app.db.said import driver_said
from app.db.urls import missing_sqlite_file, normalise_database_url, shown
from app.handler_modules import import_handler_modules
from app.registry import default_registry
from app.settings import Settings, describe
from app.trace.query import Trace, trace_event

NOT_FOUND = (
    "no consumer has a record of eventId {event_id}: it has not been consumed yet, it was "
    "stale for every consumer (stale events leave no row), or it never had a readable "
    "eventId (such poison is kept under its topic, partition and offset)."
)


class TraceError(Exception):
    """The database cannot be read; the message says why, for a person."""


def register(cli: typer.Typer) -> None:
    """Add the ``trace`` command to ``cli``."""
    cli.command("trace")(trace)


def trace(
    event_id: Annotated[str, typer.Argument(help="The eventId to look up.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    database_url: Annotated[
        str | None, typer.Option(help="Database to read (default: DATABASE_URL).")
    ] = None,
) -> None:
    """Show, consumer by consumer, whether an event was applied, parked, stale or failed."""
    err = error_console()
    try:
        url = _database_url(database_url)
        found = asyncio.run(_trace(url, event_id))
    except TraceError as exc:
        err.print(labelled("effectively-once trace:", exc))
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(orjson.dumps(_as_json(found), default=_json_default, option=orjson.OPT_INDENT_2))
    elif found.found:
        console = output_console()
        if found.findings:
            console.print(_table(found))
        if found.outbox:
            console.print(_outbox_table(found))
    if not found.found:
        if not as_json:
            err.print(NOT_FOUND.format(event_id=event_id), highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _database_url(option: str | None) -> str:
    try:
        url = normalise_database_url(option) if option else Settings().database_url
    except ValidationError as exc:
        raise TraceError(f"invalid settings: {'; '.join(describe(exc))}") from exc
    except ValueError as exc:
        raise TraceError(f"--database-url is not usable: {driver_said(exc)}") from exc
    if missing := missing_sqlite_file(url):
        raise TraceError(f"no SQLite database at {missing}")
    return url


async def _trace(url: str, event_id: str) -> Trace:
    engine = create_engine(url, pool_size=1)
    where = shown(url)
    try:
        async with engine.connect() as conn:
            consumers = registered_consumers()
            return await trace_event(conn, event_id, consumers, _handles if consumers else None)
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        raise TraceError(f"cannot read {where}: {driver_said(exc)}") from exc
    finally:
        await engine.dispose()


def registered_consumers() -> list[str] | None:
    """The consumers of HANDLER_MODULES, or None (then every consumer's rows are read): also
    when the setting is not given, whose default names the bundled example's consumers."""
    try:
        settings = Settings()
        if "handler_modules" not in settings.model_fields_set:
            return None
        import_handler_modules(settings.handler_module_names)
    except Exception as exc:
        reason = str(exc).strip().splitlines()
        typer.echo(
            f"effectively-once trace: {reason[0] if reason else type(exc).__name__}; every "
            "consumer's rows are shown",
            err=True,
        )
        return None
    return default_registry.consumers or None


def _handles(consumer: str, event_type: str) -> bool:
    return bool(default_registry.handlers_for(consumer, event_type))


def _table(found: Trace) -> Table:
    title = f"eventId {found.event_id}"
    if found.event_type:
        title += f": {found.event_type}"
    if found.aggregate_id is not None:
        title += f" on {found.aggregate_type} {found.aggregate_id}"
    if found.version is not None:
        title += f", version {found.version}"
    table = Table(title=title, title_justify="left")
    table.add_column("consumer")
    table.add_column("state")
    table.add_column("when", no_wrap=True)
    table.add_column("details")
    for finding in found.findings:
        when = f"{finding.at:%Y-%m-%d %H:%M:%S} UTC" if finding.at is not None else ""
        table.add_row(finding.consumer or "(poison)", finding.state, when, finding.detail)
    return table


def _outbox_table(found: Trace) -> Table:
    table = Table(title=f"outbox rows of eventId {found.event_id}", title_justify="left")
    for name in ("id", "row", "topic", "status", "written", "published", "tries", "last error"):
        table.add_column(name, no_wrap=name in ("written", "published"))
    for row in found.outbox:
        table.add_row(
            str(row.id),
            row.kind,
            row.topic,
            row.status,
            f"{row.created_at:%Y-%m-%d %H:%M:%S}" if row.created_at else "",
            f"{row.published_at:%Y-%m-%d %H:%M:%S}" if row.published_at else "",
            str(row.retry_count),
            (row.last_error or "")[:160],
        )
    return table


def _as_json(found: Trace) -> dict[str, Any]:
    return {
        "eventId": found.event_id,
        "found": found.found,
        "eventType": found.event_type,
        "aggregateType": found.aggregate_type,
        "aggregateId": found.aggregate_id,
        "aggregateVersion": found.version,
        "consumers": [
            {
                "consumer": f.consumer,
                "state": f.state,
                "at": f.at,
                "detail": f.detail,
                **dict(f.fields),
            }
            for f in found.findings
        ],
        "outbox": [
            {
                "id": row.id,
                "row": row.kind,
                "topic": row.topic,
                "status": row.status,
                "createdAt": row.created_at,
                "publishedAt": row.published_at,
                "retryCount": row.retry_count,
                "lastError": row.last_error,
            }
            for row in found.outbox
        ],
    }


def _json_default(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)
