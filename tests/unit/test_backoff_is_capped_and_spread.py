"""A pause never overflows, however long an outage lasts, and workers paused together
do not all resume at the same moment.

Contract: ``Backoff.delay(attempt)`` is finite and at most ``maximum`` for every
attempt (1,026 and one million included: the exponent is capped, where
``0.5 * 2 ** 1025`` raised ``OverflowError``), and at least ``(1 - jitter)`` of
the un-jittered delay: the jitter takes off up to that share, drawn from the
injected ``random`` (``jitter=0``: exactly the doubling). ``retry_in_place``
keeps pausing past attempt 1,026 instead of stopping the worker.
"""

from __future__ import annotations

import math

import pytest

from app.pipeline.pause import Backoff, retry_in_place


class Draws:
    """An injected ``random()`` returning the given values in turn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def __call__(self) -> float:
        return self.values.pop(0)


@pytest.mark.parametrize("attempt", [1_025, 1_026, 1_027, 10_000, 1_000_000])
def test_a_pause_after_any_number_of_attempts_is_the_maximum(attempt: int) -> None:
    backoff = Backoff(initial=0.5, maximum=30.0, jitter=0.0)

    assert backoff.delay(attempt) == 30.0


@pytest.mark.parametrize("attempt", [1, 2, 5, 7, 1_026, 10**9])
def test_a_jittered_pause_stays_between_its_floor_and_the_doubling(attempt: int) -> None:
    plain = Backoff(initial=0.5, maximum=30.0, jitter=0.0).delay(attempt)
    lowest = Backoff(initial=0.5, maximum=30.0, jitter=0.5, random=lambda: 1.0).delay(attempt)
    highest = Backoff(initial=0.5, maximum=30.0, jitter=0.5, random=lambda: 0.0).delay(attempt)

    assert math.isfinite(lowest)
    assert lowest == pytest.approx(plain * 0.5)
    assert highest == plain


def test_workers_paused_by_one_outage_resume_at_different_moments() -> None:
    draws = Draws(0.1, 0.9, 0.5)
    backoff = Backoff(initial=1.0, maximum=30.0, jitter=0.5, random=draws)

    delays = [backoff.delay(6) for _ in range(3)]

    assert delays == pytest.approx([30.0 * 0.95, 30.0 * 0.55, 30.0 * 0.75])
    assert len(set(delays)) == 3


def test_the_default_spreads_by_half() -> None:
    assert Backoff().jitter == 0.5


async def test_retry_in_place_keeps_pausing_past_attempt_1026() -> None:
    slept: list[float] = []
    failures = 1_100

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def operation() -> str:
        nonlocal failures
        if failures:
            failures -= 1
            raise ConnectionRefusedError("database down")
        return "done"

    result = await retry_in_place(
        "batch", operation, Backoff(initial=0.5, maximum=30.0, jitter=0.0), sleep=sleep
    )

    assert result == "done"
    assert len(slept) == 1_100
    assert slept[-1] == 30.0
