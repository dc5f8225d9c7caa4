"""Infrastructure failures are told apart from the event's own failures.

Contract: ``is_infrastructure`` is true for ``InfrastructureError``, ``OSError``
(connection refused/reset, network unreachable), timeouts, SQLAlchemy
disconnection/pool timeouts, ``OperationalError``/``InterfaceError``, any DBAPI
error whose connection was invalidated, serialization failures and deadlocks
(PostgreSQL SQLSTATE 40001/40P01/55P03, MySQL 1205/1213), the connection
errors of redis, asyncpg and aiomysql, and the broker's (aiokafka's
connection error, its timeouts and the retriable broker responses a publish of
a retry or DLT record meets while the broker is down or electing a leader).
Everything else (a bug, a bad value, an ordinary integrity error) is the
event's failure.
"""

from __future__ import annotations

import pytest
from aiokafka import errors as kafka
from sqlalchemy import exc as sa_exc

from app.errors import InfrastructureError, PermanentError, RetryableError
from app.pipeline.classify import is_infrastructure


class PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


class Psycopg2Error(Exception):
    def __init__(self, pgcode: str) -> None:
        super().__init__(pgcode)
        self.pgcode = pgcode


def foreign(module: str, name: str) -> BaseException:
    """An exception whose class looks like it comes from ``module`` (no driver installed)."""
    return type(name, (Exception,), {"__module__": module})("boom")


def dbapi(kind: type[sa_exc.DBAPIError], orig: BaseException, invalidated: bool = False):
    return kind("SELECT 1", {}, orig, connection_invalidated=invalidated)


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
    foreign("aiomysql", "ConnectionError"),
    foreign("pymysql.err", "ConnectionResetError"),
    kafka.KafkaConnectionError("no broker available"),
    kafka.KafkaTimeoutError(),
    kafka.RequestTimedOutError(),
    kafka.NodeNotReadyError(),
    kafka.NotLeaderForPartitionError(),
    kafka.LeaderNotAvailableError(),
    kafka.NotEnoughReplicasError(),
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
    foreign("redis.exceptions", "ResponseError"),
    foreign("asyncpg.exceptions", "UniqueViolationError"),
    foreign("mylib.net", "ConnectionError"),
]


@pytest.mark.parametrize("exc", INFRASTRUCTURE, ids=lambda e: repr(e)[:60])
def test_infrastructure_failures(exc: BaseException) -> None:
    assert is_infrastructure(exc) is True


@pytest.mark.parametrize("exc", EVENT_FAULTS, ids=lambda e: repr(e)[:60])
def test_the_events_own_failures(exc: BaseException) -> None:
    assert is_infrastructure(exc) is False


def test_an_infrastructure_error_wrapping_anything_is_infrastructure() -> None:
    try:
        raise InfrastructureError("handler: boom") from ValueError("boom")
    except InfrastructureError as exc:
        assert is_infrastructure(exc) is True
