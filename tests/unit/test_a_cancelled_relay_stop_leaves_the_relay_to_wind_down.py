"""A relay's stop that is itself cancelled is cancelled, and the relay still winds down.

Contract (``RelayRunner.stop``): the stop waits for the relay's own task to wind down
(the rows in hand settled within the stop's grace). When the task calling ``stop`` is
cancelled meanwhile (a worker's start cancelled again during its clean-up), that
cancellation ends the caller, as any would; it is not passed into the relay's task
(whose settlement would be cut off, its rows left ``PROCESSING`` until the lease
expires), and not taken for the end of that task (the caller would go on closing the
broker and the engine under a relay that still runs).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.outbox.runner import RelayRunner
from app.settings import Settings

WIND_DOWN = 0.3


class StartedBroker:
    """A broker the relay never uses here."""

    stopped = False

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        self.stopped = True


async def test_a_cancelled_stop_is_cancelled_and_the_relay_winds_down(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'never-opened.db'}")
    runner = RelayRunner(settings, sample=False)
    broker = StartedBroker()
    runner.broker = broker  # type: ignore[assignment]
    wound_down = asyncio.Event()

    async def relay_winding_down() -> None:
        await runner.relay.stopped()
        await asyncio.sleep(WIND_DOWN)  # the last settlement, within the grace
        wound_down.set()

    relay = asyncio.ensure_future(relay_winding_down())
    runner._tasks = [relay]
    stopping = asyncio.ensure_future(runner.stop())
    await asyncio.sleep(WIND_DOWN / 3)
    stopping.cancel()

    await asyncio.wait([stopping], timeout=WIND_DOWN * 10)
    assert stopping.cancelled(), "the stop took its own cancellation for the relay's end"
    assert not broker.stopped  # nothing closed under the relay
    await asyncio.wait([relay], timeout=WIND_DOWN * 10)
    assert wound_down.is_set(), "the stop's cancellation cut the relay's wind-down"
    await runner.engine.dispose()
