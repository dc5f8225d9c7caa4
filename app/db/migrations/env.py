"""Alembic environment of effectively-once, driven from ``app.db.migrate`` (no alembic.ini).

``app.db.migrate.upgrade`` opens an async connection, takes the migration
lock, and hands the connection in through ``config.attributes["connection"]``
from inside ``AsyncConnection.run_sync`` (Alembic's documented pattern for
sharing an async connection). Every history runs through this file: the
framework's and each handler package's (``app.db.histories``), each with the
version table ``config.attributes["version_table"]`` names.

The version tables are our own, so that an application keeping its own
Alembic history in the same database is not disturbed; for the same reason
autogenerate leaves alone any table that is not in the framework's metadata.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from app.db.histories import MAX_NAME, VERSION_TABLE
from app.db.tables import metadata


def _only_known_tables(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """False for a table that exists in the database but not in our metadata."""
    return not (type_ == "table" and reflected and compare_to is None)


def run_migrations(connection: Connection) -> None:
    """Run the pending revisions on ``connection``; its owner commits."""
    version_table = context.config.attributes.get("version_table", VERSION_TABLE)
    context.configure(
        connection=connection,
        target_metadata=metadata if version_table == VERSION_TABLE else None,
        version_table=version_table,
        # Alembic names the table's primary key ``<table>_pkc``: a table named at the
        # identifier's limit (a long package name, ``histories``) gets none.
        version_table_pk=len(f"{version_table}_pkc") <= MAX_NAME,
        include_object=_only_known_tables,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if context.is_offline_mode() or connection is None:
    raise RuntimeError(
        "run the migrations through app.db.migrate (python -m app.db.migrate), "
        "which supplies the database connection"
    )
run_migrations(connection)
