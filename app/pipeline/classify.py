"""Whose fault a failure is: a dependency's (pause and retry in place) or the event's (route it).

``fault_of`` sorts every exception into one of four kinds:

- ``CONNECTION``: a dependency is unreachable, lost the connection, is out of
  resources or shutting down, or did not answer within the worker's own
  deadline (the connection is dropped). Never the event's fault: pause, retry
  in place, for as long as it takes.
- ``CONFLICT``: the transaction lost a race (serialization failure, deadlock,
  lock timeout): run it again. A consumer's batch that lost a race (``lost_a_race``)
  runs again at once, as a conflict; a lock wait that timed out pauses like
  ``CONNECTION`` (whoever holds the lock may hold it as long again).
- ``STATEMENT``: the server cancelled one statement (its statement timeout,
  an operator's cancel). Paused like the others; a step that keeps meeting the
  same one is escalated by the processor (its events isolated, the one whose
  handler meets it routed), because a retry may never get past it.
- ``EVENT``: everything else, a constraint the data breaks (a CHECK, a
  trigger's SIGNAL, a value out of range, a unique key) or a bug.

Database errors are sorted by their code (PostgreSQL's SQLSTATE, MySQL's and
MariaDB's error number, SQLite's result code), not by the driver's exception
class: pymysql raises ``OperationalError`` for every server error it has no
class for, CHECK violations and trigger SIGNALs included.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum

from sqlalchemy import exc as sa_exc

from app.db.error_code import error_code
from app.errors import InfrastructureError


class Fault(StrEnum):
    """Whose fault a failure is, and so what the pipeline does about it."""

    CONNECTION = "connection"
    CONFLICT = "conflict"
    STATEMENT = "statement"
    EVENT = "event"


# PostgreSQL SQLSTATEs.
_PG_CONFLICT = {"40001", "40P01", "55P03"}
_PG_RACE = {"40001", "40P01"}  # serialization failure, deadlock (not a lock wait timed out)
_PG_STATEMENT = {"57014"}  # query_canceled: statement_timeout or pg_cancel_backend
# Classes: connection exception, the login refused (a password rotated under a running
# worker: no event could commit either), insufficient resources, operator intervention
# (shutdown, cannot connect now, the database dropped, idle session timeout), system error;
# and a database that does not exist (yet), or does not accept connections now (55000), a
# session ended for idling in a transaction (25P03), and a prepared statement missing or
# there twice (26000, 42P05): PgBouncer's transaction mode without ``pgbouncer=true`` in
# the URL, which no event causes (``app.db.liveness`` says so at connect).
_PG_CONNECTION_CLASSES = ("08", "28", "53", "57", "58")
_PG_CONNECTION = {"3D000", "55000", "25P03", "26000", "42P05"}

# MySQL / MariaDB error numbers (client errors, 2000-2999, are all about the connection).
_MYSQL_CONFLICT = {1205, 1213, 1020}
_MYSQL_RACE = {1213, 1020}  # deadlock, record changed since read (not 1205, a lock wait)
_MYSQL_STATEMENT = {1317, 1969, 3024}  # interrupted; max_statement_time; max_execution_time
_MYSQL_CONNECTION = {
    1021,
    1030,
    1037,
    1038,
    1040,
    1041,
    1042,
    1043,
    1044,
    1045,
    1049,
    1053,
    1114,
    1129,
    1130,
    1135,
    1152,
    1158,
    1159,
    1160,
    1161,
    1184,
    1203,
    1226,
    1290,
    1698,
    1792,
    1836,
    1927,
    4031,
}  # fmt: skip (1044, 1045, 1698: the login or the database refused to this user)

# SQLite primary result codes.
_SQLITE_CONFLICT = {5, 6}  # BUSY, LOCKED
_SQLITE_STATEMENT = {9}  # INTERRUPT
_SQLITE_CONNECTION = {7, 8, 10, 13, 14, 15}  # NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL


_DRIVERS = ("asyncpg", "aiomysql", "pymysql", "sqlite3", "aiosqlite", "psycopg")


def through_a_dependency(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside SQLAlchemy or a database driver (its traceback
    passes through them), not by the code that called them.

    ``fault_of`` takes any ``OSError`` or ``TimeoutError`` for a connection's: in the
    framework's own steps every one comes from the database, the broker or Redis. A
    handler's may be its own (an HTTP call that timed out, a file it could not open):
    that is the event's failure, routed through the retry tiers, or a batch would wait
    in place for ever on a dependency the framework cannot see recover.
    """
    seen: set[int] = set()
    found: BaseException | None = exc
    # Its causes too: a handler's own deadline around a statement (``asyncio.timeout``,
    # ``wait_for``) raises in the handler, the cancelled statement its cause; so does a
    # handler that turns a driver's error into one of its own (``raise ... from exc``).
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        tb = found.__traceback__
        while tb is not None:
            if tb.tb_frame.f_globals.get("__name__", "").startswith(("sqlalchemy", *_DRIVERS)):
                return True
            tb = tb.tb_next
        found = found.__cause__
    return False


def is_infrastructure(exc: BaseException) -> bool:
    """True when ``exc`` is not the event's fault (see ``fault_of``)."""
    return fault_of(exc) is not Fault.EVENT


def fault_of(exc: BaseException) -> Fault:
    """Sort ``exc`` into ``CONNECTION``, ``CONFLICT``, ``STATEMENT`` or ``EVENT``."""
    if isinstance(exc, InfrastructureError):
        cause = exc.__cause__
        found = fault_of(cause) if cause is not None else Fault.EVENT
        return Fault.CONNECTION if found is Fault.EVENT else found
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return Fault.CONNECTION
        by_code = _by_code(exc.orig)
        if by_code is not None:
            return by_code
        if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
            return Fault.CONNECTION  # no code to tell: what these classes mostly mean
        if _driver_state_broken(exc.orig):
            return Fault.CONNECTION
        return Fault.EVENT
    if isinstance(exc, OSError | asyncio.TimeoutError | TimeoutError):
        return Fault.CONNECTION
    if isinstance(exc, sa_exc.DisconnectionError | sa_exc.TimeoutError):
        return Fault.CONNECTION
    module = type(exc).__module__
    if module.startswith(_DRIVERS):  # a driver's own error, raised outside SQLAlchemy
        by_code = _by_code(exc)
        if by_code is not None:
            return by_code
    if module.startswith(("aiokafka", "kafka")):
        # The broker refused or did not answer (not leader, timeout, connection): never the
        # event's fault; a publish that failed this way is retried, never given up.
        return Fault.CONNECTION
    if module.startswith("redis") and type(exc).__name__ in {"ConnectionError", "TimeoutError"}:
        return Fault.CONNECTION
    if module.startswith(("asyncpg", "aiomysql", "pymysql")) and "Connection" in type(exc).__name__:
        return Fault.CONNECTION
    if _driver_state_broken(exc):
        return Fault.CONNECTION
    return Fault.EVENT


def _driver_state_broken(error: BaseException | None) -> bool:
    """asyncpg's ``InternalClientError`` (as itself, or the cause of SQLAlchemy's
    ``InternalError``): the driver's protocol state is broken ("cannot switch to state 11;
    another operation is in progress", met on a new connection right after the server
    restarted, and after a session terminated mid-statement). The connection is of no
    further use; nothing about the event."""
    for candidate in (error, getattr(error, "__cause__", None)):
        kind = type(candidate)
        if kind.__name__ == "InternalClientError" and kind.__module__.startswith("asyncpg"):
            return True
    return False


# A unique key already taken: PostgreSQL 23505, MySQL/MariaDB 1062 (and 1586), SQLite's
# SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_UNIQUE.
_UNIQUE = {"23505", 1062, 1586, 1555, 2067}


# A value of the event's that its column can never hold, whatever else the database holds:
# text too long, not a number or a date, characters the encoding lacks, or no value where one
# is required. PostgreSQL: 22001, 22P02, 22007, 22008, 22021, 22P05, 23502; MySQL/MariaDB:
# 1048, 1292, 1366, 1406; SQLite: SQLITE_CONSTRAINT_NOTNULL. Left retryable, as they may
# pass once other events changed the rows they rest on: a CHECK (a balance below zero), a
# number out of range (a counter grown past its type), a division by zero, a foreign key
# (the row it needs may come later) and a unique key (a race).
_PG_DATA = {"22001", "22P02", "22007", "22008", "22021", "22P05", "23502"}
_MYSQL_DATA = {1048, 1292, 1366, 1406}
_SQLITE_DATA = {1299}


def is_data_error(exc: BaseException) -> bool:
    """True when ``exc`` (or an error it wraps or was raised from) is the database refusing a
    value its column can never hold (``_PG_DATA``): the same statement fails on every
    attempt."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        found = pending.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        code = error_code(found)
        if isinstance(code, str):
            if code in _PG_DATA:
                return True
        elif code is not None:
            sqlite = getattr(found, "sqlite_errorcode", None) is not None
            if code in (_SQLITE_DATA if sqlite else _MYSQL_DATA):
                return True
        pending += [getattr(found, "orig", None), found.__cause__]
    return False


def is_unique_violation(exc: sa_exc.IntegrityError) -> bool:
    """True when ``exc`` says a row with the same unique key exists."""
    return error_code(exc.orig) in _UNIQUE


def signature(exc: BaseException) -> tuple[str, str]:
    """What makes two failures "the same": the kind of fault and the error's code (or class)."""
    root = exc.__cause__ if isinstance(exc, InfrastructureError) and exc.__cause__ else exc
    orig = root.orig if isinstance(root, sa_exc.DBAPIError) else root
    code = error_code(orig)
    return (fault_of(exc).value, str(code) if code is not None else type(orig).__qualname__)


def _by_code(orig: BaseException | None) -> Fault | None:
    """The kind of a driver error by its code; None when it carries no code we read."""
    code = error_code(orig)
    if isinstance(code, str):
        if code in _PG_CONFLICT:
            return Fault.CONFLICT
        if code in _PG_STATEMENT:
            return Fault.STATEMENT
        if code in _PG_CONNECTION or code.startswith(_PG_CONNECTION_CLASSES):
            return Fault.CONNECTION
        return Fault.EVENT
    if code is None:
        return None
    if getattr(orig, "sqlite_errorcode", None) is not None:
        primary = code & 0xFF
        for codes, fault in (
            (_SQLITE_CONFLICT, Fault.CONFLICT),
            (_SQLITE_STATEMENT, Fault.STATEMENT),
            (_SQLITE_CONNECTION, Fault.CONNECTION),
        ):
            if primary in codes:
                return fault
        return Fault.EVENT
    if code in _MYSQL_CONFLICT:
        return Fault.CONFLICT
    if code in _MYSQL_STATEMENT:
        return Fault.STATEMENT
    if code in _MYSQL_CONNECTION or 2000 <= code < 3000:
        return Fault.CONNECTION
    return Fault.EVENT


def lost_a_race(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from: a handler's failure wraps the driver's)
    is a deadlock or a serialization failure: the database chose this transaction to roll
    back so another could commit, and running it again settles it. A lock wait that timed
    out is not: whoever holds the lock may hold it for as long again (a pause, not a race).
    """
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        # A code of the database's own: SQLAlchemy's error's, or a driver's raised outside it.
        orig: BaseException | None
        if isinstance(found, sa_exc.DBAPIError):
            orig = found.orig
        else:
            orig = found if type(found).__module__.startswith(_DRIVERS) else None
        code = error_code(orig)
        if code in _PG_RACE:
            return True
        if code in _MYSQL_RACE and getattr(orig, "sqlite_errorcode", None) is None:
            return True
        found = found.__cause__
    return False
