"""Fixtures for the pipeline tests: the public harness (``app.testing``) on SQLite, no broker.

Each test gets a fresh SQLite file migrated like a worker's database plus the
``effect`` table test handlers write to, a fresh ``Registry``, records with
increasing offsets, a frozen clock, the outbox the routed records land in, and a
factory of ``BatchProcessor``s over all of them (``Harness.processor``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.pipeline.processor import BatchProcessor
from app.registry import Registry
from app.testing import FrozenClock, Harness
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, Outbox, test_metadata

# The shipped default tiers (RETRY_DELAYS=1,5,30,300).
DELAYS = (1.0, 5.0, 30.0, 300.0)


@pytest.fixture
def registry() -> Registry:
    """A registry of its own for each test: no handler leaks between tests."""
    return Registry()


@pytest.fixture
def clock() -> FrozenClock:
    """The router's clock, frozen at ``app.testing.NOW``."""
    return FrozenClock()


@pytest.fixture
async def harness(tmp_path: Path, registry: Registry, clock: FrozenClock) -> AsyncIterator[Harness]:
    """The harness over a SQLite file with the framework's tables and the ``effect`` table."""
    async with Harness(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'pipeline.db'}",
        registry=registry,
        tables=[test_metadata],
        topic=TOPIC,
        retry_delays=DELAYS,
        clock=clock,
    ) as started:
        yield started


@pytest.fixture
def engine(harness: Harness) -> AsyncEngine:
    """The test database."""
    return harness.engine


@pytest.fixture
def records() -> Records:
    """Records with increasing offsets on partition 0."""
    return Records()


@pytest.fixture
def outbox(engine: AsyncEngine) -> Outbox:
    """The retry and DLT records the test's processors wrote to the outbox."""
    return Outbox(engine)


@pytest.fixture
def make_processor(harness: Harness) -> Callable[..., BatchProcessor]:
    """``make_processor(delays=DELAYS, **overrides)``: a new processor over the test database
    and registry, routing failures of ``TOPIC`` through ``delays`` with the frozen ``clock``
    (their records land in the outbox).

    Consumers run one after the other (SQLite) and infrastructure pauses last a millisecond.
    """

    def make(delays: tuple[float, ...] = DELAYS, **overrides: Any) -> BatchProcessor:
        return harness.processor(delays, **overrides)

    return make


@pytest.fixture
def db(engine: AsyncEngine) -> Db:
    """Read access to the test database."""
    return Db(engine)
