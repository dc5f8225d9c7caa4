"""Follow the group's progress from the broker, and the longest time it made none.

Progress is the consumer group's committed offsets on the order topic: the
framework commits an offset only after the records below it took effect (or
went to the DLT), so an offset that moves means work got done. Work is pending
while some partition's committed offset is behind the end the producer side
reached. "Without progress" is a stretch during which work was pending and no
committed offset moved; the longest such stretch is the soak's figure. (Offsets
are committed every few seconds, so the figure has that granularity.)

While the database is down or blackholed, or the broker refuses everyone, no commit
can happen at all: a stall then measures the fault as much as the framework. So the
samples are kept, and ``stall_outside`` finds the longest stretch without progress
that the framework itself owes: the seconds inside such outages are left out, and a
stretch that an outage interrupts counts again from the outage's end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

SAMPLE_SECONDS = 1.0
log = logging.getLogger("chaos.watch")


@dataclass(frozen=True)
class Stall:
    """A stretch without progress: from ``start`` for ``seconds`` (soak time)."""

    start: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class Sample:
    """One look at the group: at ``at`` (soak time), ``done`` records committed, ``pending``
    still to commit."""

    at: float
    done: int
    pending: int


@dataclass
class StallTracker:
    """Finds the longest stretch in which work was pending and nothing moved."""

    longest: Stall = field(default_factory=Stall)
    _since: float | None = None
    _done: int | None = None

    def observe(self, now: float, done: int, pending: int) -> None:
        """One sample: ``done`` records committed in all, ``pending`` still to commit."""
        if self._since is None or pending == 0 or done != self._done:
            self._since = now
        self._done = done
        seconds = now - self._since
        if seconds > self.longest.seconds:
            self.longest = Stall(self._since, seconds)


@dataclass
class ProgressWatch:
    """Samples the group's committed offsets every second while ``run`` runs."""

    bootstrap: str
    group: str
    topic: str
    partitions: int
    ends: Callable[[], dict[int, int]]
    started: float
    tracker: StallTracker = field(default_factory=StallTracker)
    pending: int | None = None  # at the last successful sample
    sampled_at: float = 0.0  # monotonic time of the last successful sample
    loads: list[float] = field(default_factory=list)  # the machine's 1-minute load, each second
    samples: list[Sample] = field(default_factory=list)  # one per sample the broker answered

    async def run(self) -> None:
        """Sample until cancelled; a sample the broker does not answer is skipped."""
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5_000)
        await admin.start()
        partitions = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        try:
            while True:
                self.loads.append(os.getloadavg()[0])
                try:
                    async with asyncio.timeout(10):
                        committed = await admin.list_consumer_group_offsets(
                            self.group, partitions=partitions
                        )
                except Exception as exc:  # the broker connection was just cut, or so
                    log.debug("no sample: %r", exc)
                else:
                    self._sample({tp.partition: meta.offset for tp, meta in committed.items()})
                await asyncio.sleep(SAMPLE_SECONDS)
        finally:
            await admin.close()

    def drained_since(self, moment: float) -> bool:
        """True when a sample taken after ``moment`` (monotonic) found nothing pending."""
        return self.pending == 0 and self.sampled_at > moment

    def _sample(self, committed: dict[int, int]) -> None:
        done = {p: max(offset, 0) for p, offset in committed.items()}
        ends = self.ends()
        self.pending = sum(max(0, end - done.get(p, 0)) for p, end in ends.items())
        self.sampled_at = time.monotonic()
        sample = Sample(self.sampled_at - self.started, sum(done.values()), self.pending)
        self.samples.append(sample)
        self.tracker.observe(sample.at, sample.done, sample.pending)


def stall_outside(samples: Sequence[Sample], outages: Iterable[tuple[float, float]]) -> Stall:
    """The longest stretch without progress once the seconds of ``outages`` (start, end),
    during which nothing could commit, are left out: a stretch restarts at an outage's end
    (the broker's outage has no samples in it: the broker answers none)."""
    windows = sorted(outages)
    longest = Stall()
    since: float | None = None
    done: int | None = None
    for sample in samples:
        inside = any(start <= sample.at <= end for start, end in windows)
        if since is None or inside or sample.pending == 0 or sample.done != done:
            since = sample.at
        else:
            ended = [end for _, end in windows if since < end <= sample.at]
            since = max(ended, default=since)
        done = sample.done
        if sample.at - since > longest.seconds:
            longest = Stall(since, sample.at - since)
    return longest
