"""While rows keep coming, a relay claims a poll interval after the last claim *started*.

Contract (``Relay.run``): after a claim that found rows (not a full one) the next claim
starts ``poll_interval`` after that claim started, or at once when the cycle (claim,
publish, settle) took longer; a pause is never added on top of a long cycle, and short
cycles are still paced, not run back to back. Real time, a relay whose cycles are timed
stand-ins (``step`` is the relay's step in ``run``).
"""

from __future__ import annotations

import asyncio
import time

from app.outbox.relay import Relay, RelayConfig

CYCLES = 6


class TimedRelay(Relay):
    """A relay whose every cycle claims one row and takes ``cycle`` seconds."""

    def __init__(self, cycle: float, poll_interval: float) -> None:
        super().__init__(
            sessions=None,  # type: ignore[arg-type]  # never reached: step is replaced
            broker=None,  # type: ignore[arg-type]
            config=RelayConfig(batch_size=100, poll_interval=poll_interval),
        )
        self.cycle = cycle
        self.starts: list[float] = []

    async def step(self) -> int:
        self.starts.append(time.monotonic())
        if len(self.starts) >= CYCLES:
            self.stop()
        await asyncio.sleep(self.cycle)
        return 1


def mean_gap(starts: list[float]) -> float:
    return (starts[-1] - starts[0]) / (len(starts) - 1)


async def test_a_cycle_longer_than_the_poll_interval_is_followed_at_once() -> None:
    relay = TimedRelay(cycle=0.2, poll_interval=0.1)
    await relay.run()
    # Sleeping the interval after each cycle would make it 0.3 s.
    assert 0.195 <= mean_gap(relay.starts) < 0.26


async def test_short_cycles_are_paced_by_the_poll_interval() -> None:
    relay = TimedRelay(cycle=0.01, poll_interval=0.1)
    await relay.run()
    assert 0.095 <= mean_gap(relay.starts) < 0.15
