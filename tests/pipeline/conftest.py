"""Fixtures for the pipeline tests: a real SQLite file database, no broker.

Each test gets a fresh database file holding the framework's tables and the
``effect`` table test handlers write to, a fresh ``Registry``, records with
increasing offsets, a frozen clock, the outbox the routed records land in,
and a factory of ``BatchProcessor``s over all of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.db.engine import create_engine, session_factory
from app.pipeline.pause import Backoff
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.registry import Registry
from dlq.policy import RetryPolicy
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, FrozenClock, Outbox, test_metadata

TINY_BACKOFF = Backoff(initial=0.001, maximum=0.001, jitter=0.0)
# The shipped default tiers (RETRY_DELAYS=1,5,30,300).
DELAYS = (1.0, 5.0, 30.0, 300.0)


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """A SQLite file database with the framework's tables and the ``effect`` table."""
    eng = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'pipeline.db'}")
    async with eng.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
        await conn.run_sync(test_metadata.create_all)
    yield eng
    await eng.dispose()


@pytest.fixture
def registry() -> Registry:
    """A registry of its own for each test: no handler leaks between tests."""
    return Registry()


@pytest.fixture
def records() -> Records:
    """Records with increasing offsets on partition 0."""
    return Records()


@pytest.fixture
def clock() -> FrozenClock:
    """The router's clock, frozen at ``support.NOW``."""
    return FrozenClock()


@pytest.fixture
def outbox(engine: AsyncEngine) -> Outbox:
    """The retry and DLT records the test's processors wrote to the outbox."""
    return Outbox(engine)


@pytest.fixture
def make_processor(
    engine: AsyncEngine, registry: Registry, clock: FrozenClock
) -> Callable[..., BatchProcessor]:
    """``make_processor(delays=DELAYS, **overrides)``: a new processor over the test database
    and registry, routing failures of ``TOPIC`` through ``delays`` with the frozen ``clock``
    (their records land in the outbox).

    Consumers run one after the other and infrastructure pauses last a millisecond.
    """

    def make(delays: tuple[float, ...] = DELAYS, **overrides: Any) -> BatchProcessor:
        options: dict[str, Any] = {
            "concurrent_consumers": False,
            "backoff": TINY_BACKOFF,
            "router": FailureRouter(RetryPolicy(TOPIC, delays), clock=clock),
        }
        options.update(overrides)
        return BatchProcessor(session_factory(engine), registry, **options)

    return make


@pytest.fixture
def db(engine: AsyncEngine) -> Db:
    """Read access to the test database."""
    return Db(engine)
