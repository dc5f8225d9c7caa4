"""A wake that arrives while the relay is in a cycle makes the next cycle start at once.

Contract (``Relay.run``): ``wake()`` called during a cycle (the worker committed rows
while the relay claimed, published or settled) is kept: once the cycle ends, the
next claim starts at once instead of after the poll interval; a wake is used up by
the cycle it starts, so the cycle after that is paced as usual. Before, the wait
after the cycle cleared the wake first, and the rows waited up to a poll interval.
Real time, a relay whose cycles are timed stand-ins (``step`` is its public step).
"""

from __future__ import annotations

import asyncio
import time

from app.outbox.relay import Relay, RelayConfig

CYCLE = 0.05
POLL_INTERVAL = 1.0


class WokenRelay(Relay):
    """Each cycle claims one row and takes ``CYCLE`` seconds; the first is woken halfway."""

    def __init__(self, cycles: int) -> None:
        super().__init__(
            sessions=None,  # type: ignore[arg-type]  # never reached: step is replaced
            broker=None,  # type: ignore[arg-type]
            config=RelayConfig(batch_size=100, poll_interval=POLL_INTERVAL),
        )
        self.cycles = cycles
        self.starts: list[float] = []

    async def step(self) -> int:
        self.starts.append(time.monotonic())
        if len(self.starts) >= self.cycles:
            self.stop()
        await asyncio.sleep(CYCLE / 2)
        if len(self.starts) == 1:
            self.wake()  # rows committed while this cycle runs
        await asyncio.sleep(CYCLE / 2)
        return 1


async def test_a_wake_during_a_cycle_starts_the_next_cycle_at_once() -> None:
    relay = WokenRelay(cycles=2)

    await asyncio.wait_for(relay.run(), 5)

    assert relay.starts[1] - relay.starts[0] < CYCLE + 0.1  # not after the poll interval


async def test_the_wake_is_used_up_by_the_cycle_it_starts() -> None:
    relay = WokenRelay(cycles=3)

    await asyncio.wait_for(relay.run(), 5)

    assert relay.starts[2] - relay.starts[1] >= POLL_INTERVAL - 0.01
