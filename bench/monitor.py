"""Follow a worker through faust's own monitor, served on its web port.

faust counts a message *in* when the agent's stream takes it and *out* when
the stream acknowledges it. The framework acknowledges a batch only after its
database transactions committed, and the bare agent right after its empty
loop body, so "acknowledged" means the same thing in every scenario: done.
Reading the counters over HTTP touches neither the broker nor the database,
so the figures and the transaction counts stay clean.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

POLL_SECONDS = 0.05
HTTP_TIMEOUT_SECONDS = 2.0
START_TIMEOUT_SECONDS = 90.0  # worker start, group join, first fetch
STALL_TIMEOUT_SECONDS = 120.0  # no event acknowledged for this long: give up


class StalledError(TimeoutError):
    """The worker did not start consuming, or stopped making progress."""


@dataclass(frozen=True)
class Counts:
    """faust's message counters for one topic at one moment."""

    taken: int
    acked: int


@dataclass(frozen=True)
class Window:
    """When the first event was taken and when the ``n``-th was acknowledged (monotonic s)."""

    first_taken: float
    last_acked: float
    events: int

    @property
    def seconds(self) -> float:
        """The time the worker spent on the events, joining the group excluded."""
        return max(self.last_acked - self.first_taken, 1e-9)

    @property
    def per_second(self) -> float:
        """Events per second over the window."""
        return self.events / self.seconds


async def counts(port: int, topic: str) -> Counts | None:
    """The worker's counters, or None while its web server does not answer yet."""
    try:
        stats = await asyncio.to_thread(_get_json, f"http://127.0.0.1:{port}/")
    except OSError:
        return None
    monitor = next(
        (s for s in stats.values() if isinstance(s, dict) and "messages_active" in s), None
    )
    if monitor is None:
        raise RuntimeError(f"no faust monitor at port {port}: is APP_WEB_STATS_ENABLED set?")
    taken = int(monitor["messages_received_by_topic"].get(topic, 0))
    # ``messages_active`` counts every topic; each worker here consumes only ``topic``.
    return Counts(taken=taken, acked=taken - int(monitor["messages_active"]))


async def wait_for_assignment(port: int, topic: str, check_alive: Callable[[], None]) -> None:
    """Return once the worker has joined its group and been given ``topic``'s partitions."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        check_alive()
        try:
            assignment = await asyncio.to_thread(_get_json, f"http://127.0.0.1:{port}/assignment/")
        except OSError:
            assignment = {}
        if assignment.get("actives", {}).get(topic):
            return
        await asyncio.sleep(POLL_SECONDS)
    raise StalledError(f"no partitions of {topic!r} assigned within {START_TIMEOUT_SECONDS:.0f} s")


async def wait_for_events(
    port: int,
    topic: str,
    events: int,
    check_alive: Callable[[], None],
    on_open: Callable[[], Awaitable[None]] | None = None,
) -> Window:
    """Poll until ``events`` messages of ``topic`` are acknowledged; return the window.

    The window opens at the first poll that sees a message taken (``on_open`` runs
    then) and closes at the first poll that sees the last one acknowledged, so each
    end is late by at most ``POLL_SECONDS`` (plus one HTTP round trip). Events all
    taken and acknowledged between two polls (a small workload, a fast worker) open
    the window at the poll before, which saw none taken: a window of no length would
    be a rate of no meaning (and a latency run at that rate, a workload without end).
    """
    first: float | None = None
    progress_at, last_acked = time.monotonic(), -1
    polled_before = progress_at  # the last poll that saw nothing taken
    while True:
        check_alive()
        now_counts = await counts(port, topic)
        now = time.monotonic()
        if now_counts is not None and now_counts.taken > 0 and first is None:
            first = now
            if on_open is not None:
                await on_open()
        if first is not None and now_counts is not None:
            if now_counts.acked >= events:
                return Window(polled_before if first == now else first, now, events)
            if now_counts.acked != last_acked:
                progress_at, last_acked = now, now_counts.acked
        if first is None:
            polled_before = now
        limit = START_TIMEOUT_SECONDS if first is None else STALL_TIMEOUT_SECONDS
        if now - progress_at > limit:
            seen = "nothing" if now_counts is None else f"{now_counts.acked:,} acknowledged"
            raise StalledError(
                f"no progress for {limit:.0f} s on {topic!r}: {seen} of {events:,} events"
            )
        await asyncio.sleep(POLL_SECONDS)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_SECONDS) as response:
        return json.loads(response.read())
