"""Services whose start ends after the worker began to stop are closed, not left running.

Contract (``faust_app._LazyServices``): the worker's shutdown hook (``close``) does not
wait for a start in progress (it may be waiting for the database). A start that ends
after it closes what it built (its relay would otherwise run on, its claimed rows
``PROCESSING``, until the process ended), and the agent that started it waits for the
stop to cancel it instead of processing anything; an agent asking after the stop starts
nothing. Before, the services of such a start were never closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.registry import Registry
from app.runtime import faust_app
from app.settings import Settings


class Started:
    """What ``start_services`` built: counts its ``close``."""

    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, list[Started]]:
    """``start_services`` waits for the event, then builds a ``Started``."""
    release, built = asyncio.Event(), list[Started]()

    async def start_services(settings: Settings, registry: Registry, starting: Any) -> Any:
        await release.wait()
        built.append(Started())
        return built[-1]

    monkeypatch.setattr(faust_app, "start_services", start_services)
    monkeypatch.setattr(faust_app, "tune_garbage_collector", lambda threshold: None)
    return release, built


def lazy() -> Any:
    return faust_app._LazyServices(Settings(broker_url="kafka://b:9092"), Registry())


async def test_a_start_ending_after_the_stop_closes_what_it_built(
    starts: tuple[asyncio.Event, list[Started]],
) -> None:
    release, built = starts
    services = lazy()
    agent = asyncio.ensure_future(services.get())
    await asyncio.sleep(0.01)
    await services.close()  # the start is still in progress: nothing to close yet
    release.set()
    await asyncio.sleep(0.05)
    assert [s.closed for s in built] == [1]
    assert not agent.done(), "the agent went on with services the stop had closed"
    agent.cancel()
    with pytest.raises(asyncio.CancelledError):
        await agent


async def test_an_agent_asking_after_the_stop_starts_nothing(
    starts: tuple[asyncio.Event, list[Started]],
) -> None:
    release, built = starts
    release.set()
    services = lazy()
    await services.close()
    agent = asyncio.ensure_future(services.get())
    await asyncio.sleep(0.05)
    assert built == [] and not agent.done()
    agent.cancel()


async def test_services_started_before_the_stop_are_closed_by_it(
    starts: tuple[asyncio.Event, list[Started]],
) -> None:
    release, built = starts
    release.set()
    services = lazy()
    assert await services.get() is built[0]
    assert await services.get() is built[0]  # one start, shared
    await services.close()
    assert built[0].closed == 1
