"""A worker starts its relay before it opens its consumers' connections ahead.

Contract (``app.runtime.services.start_services``): opening the consumers' connections
ahead of the first batch (``open_ahead``) may wait up to ``OPEN_AHEAD_SECONDS`` for a
database slow to answer; the in-worker relay is started before that wait, so its rows
never wait for it. A start cancelled during that wait (SIGTERM) stops the relay it
started, which nothing else holds yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from app.handler_modules import import_handler_modules
from app.registry import default_registry
from app.runtime import services
from app.settings import Settings
from app.testing.harness import registry_of


class FakeRelay:
    def __init__(self, settings: Settings, **_: Any) -> None:
        self.started = False
        self.stopped = False

    async def declare(self, topics: Collection[str]) -> None:
        return None

    def start(self) -> None:
        self.started = True

    def wake(self) -> None:
        return None

    async def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def relays(monkeypatch: pytest.MonkeyPatch) -> list[FakeRelay]:
    """The relays the start builds (``RELAY_ENABLED``), kept."""
    built: list[FakeRelay] = []

    def relay_of(settings: Settings, **kwargs: Any) -> FakeRelay:
        built.append(FakeRelay(settings, **kwargs))
        return built[-1]

    monkeypatch.setattr(services, "RelayRunner", relay_of)
    return built


async def start(tmp_path: Path) -> services.Services:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'worker.db'}",
        handler_modules="handlers",
        relay_enabled=True,
        redis_url=None,
        cleanup_interval="0s",
    )
    import_handler_modules(settings.handler_module_names)
    # Only the example's handlers: other tests' modules register in the same registry.
    registry = registry_of(default_registry, settings.handler_module_names)
    return await services.start_services(settings, registry)


async def test_the_relay_runs_before_the_connections_are_opened_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relays: list[FakeRelay]
) -> None:
    seen: list[bool] = []

    async def open_ahead(processor: Any) -> None:
        seen.append(relays[0].started)

    monkeypatch.setattr(services, "open_ahead", open_ahead)
    started = await start(tmp_path)
    try:
        assert seen == [True]
    finally:
        await started.close()


async def test_a_start_cancelled_while_it_opens_them_stops_its_relay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relays: list[FakeRelay]
) -> None:
    async def open_ahead(processor: Any) -> None:
        raise asyncio.CancelledError  # SIGTERM while the database is slow to answer

    monkeypatch.setattr(services, "open_ahead", open_ahead)
    with pytest.raises(asyncio.CancelledError):
        await start(tmp_path)

    assert [(relay.started, relay.stopped) for relay in relays] == [(True, True)]
