"""The error code a database driver's exception carries, the same way for every driver."""

from __future__ import annotations


def error_code(orig: BaseException | None) -> str | int | None:
    """PostgreSQL's SQLSTATE (text), SQLite's result code or MySQL's error number (ints)."""
    if orig is None:
        return None
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(state, str) and state:
        return state
    sqlite = getattr(orig, "sqlite_errorcode", None)
    if isinstance(sqlite, int):
        return sqlite
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and not isinstance(args[0], bool):
        return args[0]
    return None
