"""The example handlers keep their contracts on PostgreSQL and MariaDB too.

Contract: every test in ``tests/unit/test_handlers_*.py`` that takes a
``session`` (there a fresh SQLite database) passes with a session on a fresh
PostgreSQL and a fresh MariaDB database built by the migrations: the same
balances, stock, reservations, notification rows and sends, the same
``PermanentError``, the same statements per call. A missing server skips
the test locally and fails it under ``CI=true``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import create_engine, session_factory
from app.db.migrate import upgrade_to_head
from tests.unit import (
    test_handlers_inventory,
    test_handlers_notification,
    test_handlers_points,
    test_handlers_use_a_few_statements_per_call,
)

pytestmark = pytest.mark.integration

SERVERS = ("postgresql", "mariadb")  # SQLite: the unit tests themselves

sender = test_handlers_notification.sender  # the notification tests' fixture


@pytest.fixture(params=SERVERS)
async def session(
    request: pytest.FixtureRequest, make_database: Callable[[str], Awaitable[str]]
) -> AsyncIterator[AsyncSession]:
    """A session on a fresh database of each server, built by the migrations."""
    url = await make_database(request.param)
    await upgrade_to_head(url, ["handlers"])
    engine = create_engine(url)
    async with session_factory(engine)() as db_session:
        yield db_session
    await engine.dispose()


def session_tests_of(module: ModuleType, prefix: str) -> dict[str, Callable[..., Any]]:
    """``module``'s tests that take a ``session``, renamed ``test_<prefix>_...``."""
    return {
        f"test_{prefix}_{name.removeprefix('test_')}": fn
        for name, fn in vars(module).items()
        if name.startswith("test_") and "session" in inspect.signature(fn).parameters
    }


# Collected by pytest as tests of this module, so they get the ``session`` above.
globals().update(
    session_tests_of(test_handlers_points, "points")
    | session_tests_of(test_handlers_inventory, "inventory")
    | session_tests_of(test_handlers_notification, "notification")
    | session_tests_of(test_handlers_use_a_few_statements_per_call, "statements")
)
