"""What a database error says, for a command's one line: the driver's own words.

SQLAlchemy wraps a driver's error as ``(sqlalchemy.dialects.postgresql.asyncpg.Error)
database "x" does not exist`` followed by the statement and a link; an operator needs
the driver's first line, scrubbed of any value or password it quotes.
"""

from __future__ import annotations

from collections.abc import Iterator

from app.db.error_code import error_code
from app.scrub import scrub

# What a waiting client is told to look at, for the failures waiting will not mend by itself.
_POOLER = (
    "a pooler in transaction mode (PgBouncer) lends this connection to other clients "
    "between transactions: add pgbouncer=true to DATABASE_URL"
)
_REMEDIES: dict[str | int, str] = {
    "26000": _POOLER,  # invalid_sql_statement_name: a prepared statement missing
    "42P05": _POOLER,  # duplicate_prepared_statement
    "3D000": "the database DATABASE_URL names does not exist (yet): check its name, or "
    "create it; waiting for it",
}


def driver_said(exc: BaseException) -> str:
    """The first line of the deepest cause of ``exc`` (the driver's error under
    SQLAlchemy's), scrubbed; its type's name when it says nothing."""
    *_, deepest = _wrapped(exc)
    lines = scrub(str(deepest)).strip().splitlines()
    return lines[0] if lines else type(deepest).__name__


def remedy(exc: BaseException) -> str | None:
    """What to do about ``exc``, a database failure a client waits on, when its code says
    that waiting alone will not mend it; None otherwise."""
    for found in _wrapped(exc):
        said = _REMEDIES.get(error_code(found) or "")
        if said is not None:
            return said
    return None


def _wrapped(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what each wraps (SQLAlchemy's ``orig``, else the cause), down to the
    driver's error; each once."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        yield found
        found = getattr(found, "orig", None) or found.__cause__
