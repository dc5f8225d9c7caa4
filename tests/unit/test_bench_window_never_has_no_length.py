"""The bench's window has a length even when every event went between two polls.

Contract (``bench.monitor.wait_for_events``): the window opens at the first poll that
sees an event taken and closes at the first that sees them all acknowledged; when one
poll sees both (a smoke run's 1,500 events, a fast bare agent), it opens at the poll
before, which saw none taken. Before, such a window had no length: the bare agent's rate
was 1,500,000,000,000 events/s and the latency run sized at half of it met a
``MemoryError`` building its workload (CI saw it once).
"""

from __future__ import annotations

import pytest

from bench import monitor
from bench.monitor import Counts, wait_for_events


async def test_events_all_taken_between_two_polls_open_at_the_poll_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = iter([None, Counts(0, 0), Counts(0, 0), Counts(1_500, 1_500)])

    async def counts(port: int, topic: str) -> Counts | None:
        return next(answers)

    monkeypatch.setattr(monitor, "counts", counts)

    window = await wait_for_events(1, "orders", 1_500, lambda: None)

    assert window.seconds >= monitor.POLL_SECONDS * 0.9, window
    assert window.per_second <= 1_500 / (monitor.POLL_SECONDS * 0.9)


async def test_a_window_that_spans_polls_opens_at_the_first_event_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = iter([Counts(0, 0), Counts(10, 5), Counts(1_500, 1_500)])
    seen_at: list[float] = []

    async def counts(port: int, topic: str) -> Counts | None:
        found = next(answers)
        seen_at.append(monitor.time.monotonic())
        return found

    monkeypatch.setattr(monitor, "counts", counts)

    window = await wait_for_events(1, "orders", 1_500, lambda: None)

    assert seen_at[1] <= window.first_taken < seen_at[2] <= window.last_acked
