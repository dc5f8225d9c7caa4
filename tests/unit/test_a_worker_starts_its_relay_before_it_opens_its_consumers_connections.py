"""A worker starts its relay before it opens its consumers' connections ahead.

Contract (``app.runtime.services.start_services``): opening the consumers' connections
ahead of the first batch (``open_ahead``) may wait up to ``OPEN_AHEAD_SECONDS`` for a
database slow to answer; the in-worker relay is started before that wait, so its rows
never wait for it.
"""

from __future__ import annotations

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

    async def declare(self, topics: Collection[str]) -> None:
        return None

    def start(self) -> None:
        self.started = True

    def wake(self) -> None:
        return None

    async def stop(self) -> None:
        return None


async def test_the_relay_runs_before_the_connections_are_opened_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    relays: list[FakeRelay] = []
    seen: list[bool] = []

    def relay_of(settings: Settings, **kwargs: Any) -> FakeRelay:
        relays.append(FakeRelay(settings, **kwargs))
        return relays[-1]

    async def open_ahead(processor: Any) -> None:
        seen.append(relays[0].started)

    monkeypatch.setattr(services, "RelayRunner", relay_of)
    monkeypatch.setattr(services, "open_ahead", open_ahead)
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
    started = await services.start_services(settings, registry)
    try:
        assert seen == [True]
    finally:
        await started.close()
