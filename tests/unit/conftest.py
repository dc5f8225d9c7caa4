"""Shared by the unit tests.

- ``session``, for the example handlers' tests: a session on a fresh, migrated SQLite
  database (``tests/integration/test_example_handlers_on_each_database.py`` runs the same
  tests with a ``session`` of its own on PostgreSQL and MariaDB);
- ``engine``: an engine on a fresh SQLite database with the framework's tables;
- ``settings_from_the_test_only``: ``Settings()`` reads only what the test sets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.db import tables
from app.db.engine import create_engine, session_factory
from app.db.migrate import upgrade_to_head
from app.settings import Settings, get_settings


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[AsyncSession]:
    """A session on a fresh SQLite database built by the migrations."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'handlers.db'}"
    await upgrade_to_head(url, ["handlers"])
    engine = create_engine(url)
    async with session_factory(engine)() as db_session:
        yield db_session
    await engine.dispose()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An engine on a fresh SQLite database with the framework's tables."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'framework.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
    yield engine
    await engine.dispose()


@pytest.fixture
def settings_from_the_test_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No setting leaks in from the machine running the tests, and the cache starts empty."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
