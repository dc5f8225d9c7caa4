"""``python -m app cleanup``: apply the retention settings once (``app.db.retention``).

Reads ``DATABASE_URL``, ``OUTBOX_RETENTION``, ``DEDUP_RETENTION``, ``CLEANUP_BATCH_SIZE``
and ``CLEANUP_PAUSE_SECONDS``. Prints what it deleted. Exit codes: 0 done, 2 invalid
settings or an unreachable database. Run it from cron, or set ``CLEANUP_INTERVAL`` on one
worker deployment.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

import typer
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from app.db.engine import create_engine
from app.db.retention import Cleaned, Retention, clean
from app.db.timeouts import DbTimeouts
from app.db.urls import missing_sqlite_file, shown
from app.settings import Settings, describe


def register(cli: typer.Typer) -> None:
    """Add the ``cleanup`` command to ``cli``."""
    cli.command("cleanup")(cleanup)


def cleanup() -> None:
    """Delete published outbox rows, old dedup records and settled failures, in batches."""
    try:
        settings = Settings()
    except ValidationError as exc:
        _fail("invalid settings:\n" + "\n".join(f"  {line}" for line in describe(exc)))
    if missing := missing_sqlite_file(settings.database_url):
        _fail(f"no SQLite database at {missing}")
    retention = Retention.of(settings)
    try:
        cleaned = asyncio.run(_clean(settings.database_url, retention, settings.db_timeouts))
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        where = shown(settings.database_url)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _fail(f"cannot clean the database at {where}: {first}")
    outbox, dedup = _span(retention.outbox), _span(retention.dedup)
    typer.echo(
        f"deleted {cleaned.outbox_event} outbox row(s) published more than {outbox} ago, "
        f"{cleaned.consumed_event} dedup record(s) and {cleaned.failed_event} settled "
        f"failure(s) older than {dedup}"
    )


def _span(length: timedelta) -> str:
    """``7d``, ``12h``, ``90m``, ``45s``: the largest whole unit."""
    seconds = int(length.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


async def _clean(url: str, retention: Retention, timeouts: DbTimeouts) -> Cleaned:
    engine = create_engine(url, pool_size=1, timeouts=timeouts)
    try:
        return await clean(engine, retention)
    finally:
        await engine.dispose()


def _fail(message: str) -> None:
    print(f"effectively-once cleanup: {message}", file=sys.stderr)
    raise SystemExit(2)
