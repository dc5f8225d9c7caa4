"""Which exceptions are the infrastructure's fault rather than the event's.

An infrastructure failure pauses the batch and retries it in place: it is
never dead-lettered and its offsets never move. Everything else a handler
raises is the event's failure.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import exc as sa_exc

from app.errors import InfrastructureError

# SQLSTATE / MySQL error codes meaning "this transaction lost a race; run it again".
_PG_RETRY_STATES = {"40001", "40P01", "55P03"}
# SQLSTATE classes and codes meaning "the server is not there for us right now":
# connection exceptions, insufficient resources, operator intervention (shutdown,
# cannot connect now), system errors, a database that does not exist (yet) or that
# does not accept connections now (55000, e.g. ALLOW_CONNECTIONS false).
_PG_DOWN_CLASSES = ("08", "53", "57", "58")
_PG_DOWN_STATES = {"3D000", "55000"}
_MYSQL_RETRY_CODES = {1205, 1213}


def is_infrastructure(exc: BaseException) -> bool:
    """True when ``exc`` says a dependency is down or a transaction conflicted."""
    if isinstance(exc, InfrastructureError | OSError | asyncio.TimeoutError | TimeoutError):
        return True
    if isinstance(exc, sa_exc.DisconnectionError | sa_exc.TimeoutError):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
            return True
        return _is_conflict(exc)
    module = type(exc).__module__
    if module.startswith(("aiokafka", "kafka")):
        # The broker refused or did not answer (not leader, timeout, connection): never the
        # event's fault; a publish that failed this way is retried, never given up.
        return True
    if module.startswith("redis") and type(exc).__name__ in {"ConnectionError", "TimeoutError"}:
        return True
    return (
        module.startswith(("asyncpg", "aiomysql", "pymysql")) and "Connection" in type(exc).__name__
    )


def _is_conflict(exc: sa_exc.DBAPIError) -> bool:
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in _PG_RETRY_STATES or state in _PG_DOWN_STATES:
        return True
    if isinstance(state, str) and state.startswith(_PG_DOWN_CLASSES):
        return True
    args: tuple[object, ...] = tuple(getattr(orig, "args", ()))
    return bool(args) and args[0] in _MYSQL_RETRY_CODES
