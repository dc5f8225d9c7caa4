"""Revisions a database records that this code does not have: a newer release migrated it.

A service rolled back, or an older replica restarted while a newer one has already
migrated (the expand and contract of a rolling deploy), meets a database whose version
table names a revision its own history lacks. Alembic cannot upgrade from a revision it
cannot find, and the older code has nothing to add: the tables are newer than it knows,
and a newer release's migrations are written to keep its predecessor working. So such
a history is left as it is, with a warning that names it, and the other histories are
migrated as usual (as Flyway does with the migrations it finds applied from the future).
"""

from __future__ import annotations

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection

from app.db.histories import History


def unknown_revisions(connection: Connection, history: History, config: Config) -> list[str]:
    """The revisions ``connection``'s database records in ``history``'s version table that
    ``history``'s folder (read through ``config``) does not hold."""
    recorded = MigrationContext.configure(
        connection, opts={"version_table": history.version_table}
    ).get_current_heads()
    script = ScriptDirectory.from_config(config)
    return [revision for revision in recorded if not _known(script, revision)]


def describe(history: History, unknown: list[str]) -> str:
    """One line for the log: which history is left alone, and why."""
    return (
        f"the database's {history.version_table} records revision(s) {', '.join(unknown)}, "
        f"which {history.versions} does not hold (a newer release migrated it): its tables "
        "are left as they are, and this code runs against them as they are"
    )


def _known(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is not None
    except CommandError:  # alembic's ResolutionError among them
        return False
