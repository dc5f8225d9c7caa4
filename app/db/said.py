"""What a database error says, for a command's one line: the driver's own words.

SQLAlchemy wraps a driver's error as ``(sqlalchemy.dialects.postgresql.asyncpg.Error)
database "x" does not exist`` followed by the statement and a link; an operator needs
the driver's first line, scrubbed of any value or password it quotes.
"""

from __future__ import annotations

from app.scrub import scrub


def driver_said(exc: BaseException) -> str:
    """The first line of the deepest cause of ``exc`` (the driver's error under
    SQLAlchemy's), scrubbed; its type's name when it says nothing."""
    seen = {id(exc)}
    while (inner := getattr(exc, "orig", None) or exc.__cause__) is not None:
        if id(inner) in seen:
            break
        seen.add(id(inner))
        exc = inner
    lines = scrub(str(exc)).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
