"""A database failure that waiting alone will not mend names what to do, wherever it waits.

Contract: ``said.remedy`` names the fix for a failure whose SQLSTATE says waiting alone
will not mend it, found on the exception or anything it wraps (SQLAlchemy's ``orig``, a
cause): a prepared statement missing or there twice (26000, 42P05: PgBouncer's transaction
mode without ``pgbouncer=true``) and a database that does not exist (3D000); anything else
has none. The relay takes a missing ``outbox_event`` table only from the databases' own
words for it, not from any error whose statement names the table (before, PgBouncer's
``prepared statement ... does not exist`` on a statement reading ``FROM outbox_event`` was
reported as a database never migrated). A worker paused on such a failure says the remedy
in its pause line.
"""

from __future__ import annotations

import logging

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError, ProgrammingError

from app.db.said import remedy
from app.outbox.relay import _missing_table
from app.pipeline.pause import Backoff, retry_in_place


def wrapped(driver: Exception, statement: str = "SELECT id FROM outbox_event") -> DBAPIError:
    """``driver``'s error as SQLAlchemy raises it."""
    return ProgrammingError(statement, {}, driver)


@pytest.mark.parametrize(
    ("driver", "says"),
    [
        (
            asyncpg.exceptions.InvalidSQLStatementNameError(
                'prepared statement "__asyncpg_stmt_a__" does not exist'
            ),
            "add pgbouncer=true to DATABASE_URL",
        ),
        (
            asyncpg.exceptions.DuplicatePreparedStatementError(
                'prepared statement "__asyncpg_stmt_a__" already exists'
            ),
            "add pgbouncer=true to DATABASE_URL",
        ),
        (
            asyncpg.exceptions.InvalidCatalogNameError('database "ordrs" does not exist'),
            "the database DATABASE_URL names does not exist (yet): check its name",
        ),
    ],
)
def test_a_failure_waiting_will_not_mend_has_a_remedy(driver: Exception, says: str) -> None:
    found = remedy(wrapped(driver))
    assert found is not None and says in found
    assert remedy(driver) == found


def test_other_failures_have_none() -> None:
    assert remedy(wrapped(asyncpg.exceptions.DeadlockDetectedError("deadlock"))) is None
    assert remedy(ConnectionRefusedError("refused")) is None


@pytest.mark.parametrize(
    ("said", "missing"),
    [
        ('relation "outbox_event" does not exist', True),
        ('relation "public.outbox_event" does not exist', True),
        ("(1146, \"Table 'orders.outbox_event' doesn't exist\")", True),
        ("no such table: outbox_event", True),
        ('prepared statement "__asyncpg_stmt_a__" does not exist', False),
        ('database "outbox_event" does not exist', False),
    ],
)
def test_the_relay_takes_a_missing_table_only_from_the_databases_words(
    said: str, missing: bool
) -> None:
    assert _missing_table(wrapped(Exception(said))) is missing


async def test_a_worker_pause_says_the_remedy(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    async def fails_once() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise wrapped(
                asyncpg.exceptions.InvalidSQLStatementNameError(
                    'prepared statement "__asyncpg_stmt_a__" does not exist'
                )
            )
        return "done"

    caplog.set_level(logging.ERROR)
    backoff = Backoff(initial=0.001, maximum=0.001, jitter=0.0)
    assert await retry_in_place("the batch", fails_once, backoff) == "done"
    [line] = [r.getMessage() for r in caplog.records if "pausing" in r.getMessage()]
    assert line.endswith("add pgbouncer=true to DATABASE_URL)"), line
