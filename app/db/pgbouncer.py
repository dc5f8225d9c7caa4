"""PostgreSQL through PgBouncer in transaction mode: ``pgbouncer=true`` in the database URL.

In transaction mode PgBouncer lends a client a server connection for one transaction
only; the next may run on another, shared with other clients. So what lives on a
server connection across transactions breaks:

- named prepared statements: asyncpg prepares each statement under a name and keeps it
  for the connection's life; on another server connection the name is missing, or
  another client's. Here nothing is cached and every statement is the unnamed one,
  parsed, bound and run inside its transaction (SQLAlchemy runs every statement in a
  transaction, its ping included). Whatever PgBouncer's version: 1.21's
  ``max_prepared_statements`` is not needed.
- session settings: a ``SET`` would stay on a server connection another client gets
  next. The statement timeout is set per transaction instead (``set_config(...,
  true)``, one statement at each BEGIN). ``plan_cache_mode`` is not needed: an unnamed
  statement is planned for its own parameters at every run.

Migrations take a transaction's advisory lock (``pg_advisory_xact_lock``), which holds
in transaction mode.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.timeouts import DbTimeouts


def _unnamed() -> str:
    return ""  # asyncpg's name of the unnamed statement


CONNECT_ARGS: dict[str, Any] = {
    "statement_cache_size": 0,  # asyncpg's own cache of prepared statements
    "prepared_statement_cache_size": 0,  # SQLAlchemy's
    "prepared_statement_name_func": _unnamed,
}


def per_transaction(engine: AsyncEngine, timeouts: DbTimeouts) -> None:
    """Give each of ``engine``'s transactions the statement timeout a session would get."""
    if not timeouts.statement:
        return
    statement = (
        f"SELECT set_config('statement_timeout', '{round(timeouts.statement * 1000)}', true)"
    )

    def begin(connection: Any) -> None:
        connection.exec_driver_sql(statement)

    event.listen(engine.sync_engine, "begin", begin)
