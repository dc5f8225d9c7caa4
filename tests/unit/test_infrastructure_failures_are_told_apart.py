"""Infrastructure failures are told apart from the event's own failures, by their codes.

Contract: ``is_infrastructure`` is true for ``InfrastructureError``, ``OSError``
(connection refused/reset, network unreachable), timeouts, SQLAlchemy
disconnection/pool timeouts, any DBAPI error whose connection was invalidated,
serialization failures and deadlocks (PostgreSQL SQLSTATE 40001/40P01/55P03,
MySQL 1205/1213), the connection errors of redis, asyncpg and aiomysql, asyncpg's
``InternalClientError`` (its protocol state broken; as itself or as the cause of
SQLAlchemy's ``InternalError``), and
the broker's (aiokafka's connection error, its timeouts and the retriable
broker responses a publish of a retry or DLT record meets while the broker is
down or electing a leader). A database error with a code is sorted by the
code, not by its class: PostgreSQL classes 08, 28 (the login refused), 53, 57 and 58
and MySQL's connection, login, resource and read-only errors are infrastructure, while a MySQL
CHECK violation (3819), a trigger's SIGNAL (1644) or a value out of range
(1690), which pymysql raises as ``OperationalError``, are the event's, as are
SQLite's constraint and SQL errors (its busy, locked, I/O and full errors
are not). A unique key already taken (23505, 1062, SQLite's primary-key and
unique constraint codes) is told from other integrity errors, for the store to
run a batch again that lost a race on its dedup records. A statement the
server cancelled (PostgreSQL 57014, MariaDB 1969, MySQL 3024 and 1317) is
infrastructure of the ``STATEMENT`` kind, which the
processor escalates when it keeps coming back. An ``OperationalError`` or
``InterfaceError`` without any code is infrastructure. Everything else (a
bug, a bad value, an ordinary integrity error) is the event's failure.
"""

from __future__ import annotations

import pytest
from aiokafka import errors as kafka
from asyncpg.exceptions import _base as asyncpg_base
from sqlalchemy import exc as sa_exc

from app.errors import InfrastructureError, PermanentError, RetryableError
from app.pipeline.classify import (
    Fault,
    fault_of,
    is_infrastructure,
    is_unique_violation,
    signature,
)


class PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


class MySQLError(Exception):
    """What pymysql raises: the error number first in ``args``."""


class SQLiteError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.sqlite_errorcode = code


class Psycopg2Error(Exception):
    def __init__(self, pgcode: str) -> None:
        super().__init__(pgcode)
        self.pgcode = pgcode


def foreign(module: str, name: str) -> BaseException:
    """An exception whose class looks like it comes from ``module`` (no driver installed)."""
    return type(name, (Exception,), {"__module__": module})("boom")


def dbapi(kind: type[sa_exc.DBAPIError], orig: BaseException, invalidated: bool = False):
    return kind("SELECT 1", {}, orig, connection_invalidated=invalidated)


def protocol_state_broken() -> BaseException:
    return asyncpg_base.InternalClientError(
        "cannot switch to state 11; another operation (2) is in progress"
    )


def translated(cause: BaseException) -> BaseException:
    """What SQLAlchemy's asyncpg adapter raises for ``cause``: its own class, from it."""
    error = Exception(f"{type(cause)}: {cause}")
    error.__cause__ = cause
    return error


INFRASTRUCTURE = [
    InfrastructureError("db down"),
    OSError("network is unreachable"),
    ConnectionRefusedError("refused"),
    ConnectionResetError("reset"),
    TimeoutError("timed out"),
    sa_exc.DisconnectionError("gone"),
    sa_exc.TimeoutError("pool exhausted"),
    dbapi(sa_exc.OperationalError, Exception("database is locked")),
    dbapi(sa_exc.InterfaceError, Exception("connection closed")),
    dbapi(sa_exc.ProgrammingError, Exception("server closed"), invalidated=True),
    dbapi(sa_exc.DBAPIError, PgError("40001")),
    dbapi(sa_exc.DBAPIError, PgError("40P01")),
    dbapi(sa_exc.IntegrityError, PgError("55P03")),
    dbapi(sa_exc.DBAPIError, Psycopg2Error("40P01")),
    dbapi(sa_exc.DBAPIError, Exception(1213, "Deadlock found")),
    dbapi(sa_exc.DBAPIError, Exception(1205, "Lock wait timeout exceeded")),
    foreign("redis.exceptions", "ConnectionError"),
    foreign("redis.exceptions", "TimeoutError"),
    foreign("asyncpg.exceptions", "ConnectionDoesNotExistError"),
    protocol_state_broken(),
    dbapi(sa_exc.InternalError, translated(protocol_state_broken())),
    foreign("aiomysql", "ConnectionError"),
    foreign("pymysql.err", "ConnectionResetError"),
    kafka.KafkaConnectionError("no broker available"),
    kafka.KafkaTimeoutError(),
    kafka.RequestTimedOutError(),
    kafka.NodeNotReadyError(),
    kafka.NotLeaderForPartitionError(),
    kafka.LeaderNotAvailableError(),
    kafka.NotEnoughReplicasError(),
    dbapi(sa_exc.DBAPIError, PgError("08006")),
    dbapi(sa_exc.DBAPIError, PgError("57P01")),
    dbapi(sa_exc.DBAPIError, PgError("53300")),
    dbapi(sa_exc.DBAPIError, PgError("3D000")),
    dbapi(sa_exc.OperationalError, PgError("28P01")),  # a password rotated under the worker
    dbapi(sa_exc.OperationalError, PgError("28000")),
    dbapi(sa_exc.OperationalError, MySQLError(1045, "Access denied for user 'app'")),
    dbapi(sa_exc.OperationalError, MySQLError(1698, "Access denied for user 'root'")),
    dbapi(sa_exc.OperationalError, MySQLError(2013, "Lost connection to MySQL server")),
    dbapi(sa_exc.OperationalError, MySQLError(2003, "Can't connect to MySQL server")),
    dbapi(sa_exc.OperationalError, MySQLError(1040, "Too many connections")),
    dbapi(sa_exc.OperationalError, MySQLError(1290, "running with --read-only")),
    dbapi(sa_exc.OperationalError, MySQLError(1927, "Connection was killed")),
    dbapi(sa_exc.OperationalError, SQLiteError(5, "database is locked")),
    dbapi(sa_exc.OperationalError, SQLiteError(10, "disk I/O error")),
    dbapi(sa_exc.OperationalError, SQLiteError(13, "database or disk is full")),
]

EVENT_FAULTS = [
    ValueError("bad amount"),
    KeyError("sku"),
    RuntimeError("bug"),
    RetryableError("later"),
    PermanentError("never"),
    dbapi(sa_exc.IntegrityError, PgError("23505")),
    dbapi(sa_exc.IntegrityError, Exception(1062, "Duplicate entry")),
    dbapi(sa_exc.DataError, Exception("value too long")),
    dbapi(sa_exc.ProgrammingError, Exception("no such table")),
    dbapi(sa_exc.InternalError, translated(foreign("asyncpg.exceptions", "InternalServerError"))),
    foreign("redis.exceptions", "ResponseError"),
    foreign("asyncpg.exceptions", "UniqueViolationError"),
    foreign("mylib.net", "ConnectionError"),
    dbapi(sa_exc.OperationalError, MySQLError(3819, "Check constraint 'stock_ge_0' is violated")),
    dbapi(sa_exc.OperationalError, MySQLError(1644, "order is closed")),
    dbapi(sa_exc.OperationalError, MySQLError(1690, "BIGINT UNSIGNED value is out of range")),
    dbapi(sa_exc.OperationalError, MySQLError(1054, "Unknown column 'x'")),
    dbapi(sa_exc.DBAPIError, PgError("23514")),
    dbapi(sa_exc.DBAPIError, PgError("P0001")),
    dbapi(sa_exc.OperationalError, SQLiteError(1, "no such table: points")),
    dbapi(sa_exc.IntegrityError, SQLiteError(2067, "UNIQUE constraint failed")),
]

STATEMENT_CANCELLED = [
    dbapi(sa_exc.OperationalError, PgError("57014")),
    dbapi(sa_exc.OperationalError, MySQLError(1969, "max_statement_time exceeded")),
    dbapi(sa_exc.OperationalError, MySQLError(3024, "maximum statement execution time exceeded")),
    dbapi(sa_exc.OperationalError, MySQLError(1317, "Query execution was interrupted")),
    dbapi(sa_exc.OperationalError, SQLiteError(9, "interrupted")),
]


@pytest.mark.parametrize("exc", INFRASTRUCTURE, ids=lambda e: repr(e)[:60])
def test_infrastructure_failures(exc: BaseException) -> None:
    assert is_infrastructure(exc) is True


@pytest.mark.parametrize("exc", EVENT_FAULTS, ids=lambda e: repr(e)[:60])
def test_the_events_own_failures(exc: BaseException) -> None:
    assert is_infrastructure(exc) is False


@pytest.mark.parametrize(
    ("orig", "unique"),
    [
        (PgError("23505"), True),
        (MySQLError(1062, "Duplicate entry"), True),
        (SQLiteError(1555, "UNIQUE constraint failed: consumed_event.event_id"), True),
        (SQLiteError(2067, "UNIQUE constraint failed"), True),
        (PgError("23503"), False),
        (PgError("23502"), False),
        (MySQLError(1452, "Cannot add or update a child row"), False),
        (SQLiteError(1299, "NOT NULL constraint failed"), False),
    ],
    ids=lambda value: repr(value)[:40],
)
def test_a_unique_key_already_taken_is_told_from_other_integrity_errors(
    orig: BaseException, unique: bool
) -> None:
    assert is_unique_violation(dbapi(sa_exc.IntegrityError, orig)) is unique


@pytest.mark.parametrize("exc", STATEMENT_CANCELLED, ids=lambda e: repr(e)[:60])
def test_a_statement_the_server_cancelled_is_infrastructure_of_its_own_kind(
    exc: BaseException,
) -> None:
    assert is_infrastructure(exc) is True
    assert fault_of(exc) is Fault.STATEMENT


def test_a_lost_race_is_a_conflict_and_a_lost_server_a_connection_failure() -> None:
    assert fault_of(dbapi(sa_exc.DBAPIError, PgError("40P01"))) is Fault.CONFLICT
    assert fault_of(dbapi(sa_exc.OperationalError, MySQLError(1213, "Deadlock"))) is Fault.CONFLICT
    assert fault_of(TimeoutError("no answer")) is Fault.CONNECTION
    assert fault_of(dbapi(sa_exc.DBAPIError, PgError("57P01"))) is Fault.CONNECTION


def test_a_wrapped_failure_has_the_kind_and_signature_of_its_cause() -> None:
    cause = dbapi(sa_exc.OperationalError, PgError("57014"))
    try:
        raise InfrastructureError("points: canceled") from cause
    except InfrastructureError as wrapped:
        assert fault_of(wrapped) is Fault.STATEMENT
        assert signature(wrapped) == signature(cause) == ("statement", "57014")


def test_an_infrastructure_error_wrapping_anything_is_infrastructure() -> None:
    try:
        raise InfrastructureError("handler: boom") from ValueError("boom")
    except InfrastructureError as exc:
        assert is_infrastructure(exc) is True
