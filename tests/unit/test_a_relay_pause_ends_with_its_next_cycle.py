"""The worker reads as paused while its relay is paused, and no longer once the relay works.

Contract: ``pauses.Outside(name)`` is the pause state of a long-lived task outside any
batch: its ``on_pause`` counts the pause and makes ``effectively_once_paused`` 1,
whatever batches do meanwhile, until its ``resumed``; ``Relay.run`` calls its
``on_progress`` after every cycle that ended, so the relay's pause ends with its next
cycle. Before, a relay's pause set the start-up flag, which only start-up cleared: after
any database outage the gauge stayed 1 on a healthy worker (and its alert fired).
"""

from __future__ import annotations

import sqlalchemy.exc

from app.metrics import REGISTRY
from app.monitoring import pauses
from app.outbox.relay import Relay, RelayConfig

DOWN = sqlalchemy.exc.OperationalError("SELECT 1", {}, OSError("down"))


def paused() -> float:
    return REGISTRY.get_sample_value("effectively_once_paused") or 0.0


class PausedOnceRelay(Relay):
    """Its first cycle meets the database down (one pause), its second ends and stops."""

    def __init__(self, outside: pauses.Outside, seen: list[float]) -> None:
        super().__init__(
            sessions=None,  # type: ignore[arg-type]  # never reached: step is replaced
            broker=None,  # type: ignore[arg-type]
            config=RelayConfig(batch_size=1, poll_interval=0.01),
            on_pause=outside.on_pause,
            on_progress=outside.resumed,
        )
        self.seen = seen
        self.cycles = 0

    async def step(self) -> int:
        self.cycles += 1
        if self.cycles == 1:
            assert self.on_pause is not None
            self.on_pause("claiming outbox rows", DOWN, 0.0)
            self.seen.append(paused())
            with pauses.batch_scope():  # a batch that ends meanwhile changes nothing
                pass
            self.seen.append(paused())
            return 1
        self.stop()
        return 0


async def test_the_relays_pause_lasts_until_its_next_cycle_ends() -> None:
    seen: list[float] = []
    relay = PausedOnceRelay(pauses.Outside("relay"), seen)

    await relay.run()

    assert seen == [1.0, 1.0]
    assert paused() == 0.0


def test_one_tasks_progress_does_not_end_anothers_pause() -> None:
    relay, other = pauses.Outside("relay"), pauses.Outside("other")
    relay.on_pause("claiming", DOWN, 0.0)
    other.on_pause("sampling", DOWN, 0.0)
    relay.resumed()
    assert paused() == 1.0
    other.resumed()
    assert paused() == 0.0
