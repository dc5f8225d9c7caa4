"""Read the workers' own counters (``/metrics``) while they live.

A worker's counters start at zero with each process, so the soak keeps the last
reading of every incarnation and adds them up. A SIGKILLed worker's last seconds
are lost with it: the totals are lower bounds.

Each reading also says whether that worker is stuck: the longest stretch in which
it finished no batch while its partitions had records waiting (its own lag gauge)
is kept per incarnation. The group's progress cannot show a worker that hangs
until the schedule happens to kill it; this does.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from chaos.watch import Stall, StallTracker

SCRAPE_SECONDS = 3.0
HTTP_TIMEOUT_SECONDS = 2.0

# sample name -> the label that splits it in the totals ("" for none)
WANTED = {
    "effectively_once_duplicates_total": "source",
    "effectively_once_events_total": "outcome",
    "effectively_once_infrastructure_pauses_total": "dependency",
    "effectively_once_batch_reruns_total": "reason",
    "effectively_once_prefilter_errors_total": "",
}


Read = Callable[[str], Awaitable[str]]  # url -> the page
BATCHES = "effectively_once_batch_duration_seconds_count"
LAG = "effectively_once_consumer_lag"


@dataclass(frozen=True)
class Hang:
    """The longest a worker incarnation finished no batch while records waited for it."""

    slot: str
    start_number: int  # which start of the slot
    stall: Stall


def progress_of(text: str) -> tuple[int, int]:
    """(batches finished, records waiting in the worker's partitions) in a scrape."""
    batches = lag = 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == BATCHES:
                batches += int(sample.value)
            elif sample.name == LAG:
                lag += int(sample.value)
    return batches, lag


def totals_of(text: str) -> Counter[str]:
    """``"<metric>/<label value>" -> value`` for the ``WANTED`` counters in a scrape."""
    totals: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in WANTED:
                label = WANTED[sample.name]
                key = sample.name.removeprefix("effectively_once_").removesuffix("_total")
                if label:
                    key += f"/{sample.labels.get(label, '')}"
                totals[key] += int(sample.value)
    return totals


@dataclass
class Scraper:
    """Keeps the last reading of every worker incarnation."""

    ports: Callable[[], Mapping[str, int]]  # slot -> web port of the running workers
    incarnation: Callable[[str], int]
    started: float = field(default_factory=time.monotonic)  # the soak's t=0
    clock: Callable[[], float] = time.monotonic
    _last: dict[tuple[str, int], Counter[str]] = field(default_factory=dict)
    _idle: dict[tuple[str, int], StallTracker] = field(default_factory=dict)

    async def run(self) -> None:
        """Scrape every running worker every few seconds, until cancelled."""
        while True:
            await self.scrape_once()
            await asyncio.sleep(SCRAPE_SECONDS)

    async def scrape_once(self, read: Read | None = None) -> None:
        """One reading of every running worker (a worker that does not answer is skipped)."""
        for slot, port in dict(self.ports()).items():
            key = (slot, self.incarnation(slot))
            try:
                text = await (read or _get)(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                continue
            self._last[key] = totals_of(text)
            batches, lag = progress_of(text)
            tracker = self._idle.setdefault(key, StallTracker())
            tracker.observe(self.clock() - self.started, batches, lag)

    def totals(self) -> Counter[str]:
        """The sum over every incarnation's last reading."""
        total: Counter[str] = Counter()
        for reading in self._last.values():
            total.update(reading)
        return total

    def longest_hang(self) -> Hang | None:
        """The incarnation that went longest without a batch while records waited."""
        hangs = [Hang(slot, n, tracker.longest) for (slot, n), tracker in self._idle.items()]
        return max(hangs, key=lambda hang: hang.stall.seconds, default=None)


async def _get(url: str) -> str:
    return await asyncio.to_thread(_fetch, url)


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_SECONDS) as response:
        return str(response.read().decode())
