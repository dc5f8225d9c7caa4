"""A database sample says when it last succeeded, so that an old gauge is not taken as news.

Contract: ``effectively_once_sampled_timestamp_seconds{sample}`` is 0 from the sampler's
start until a sample succeeds, then the time of the last one that did; a failing sample
(the database out of reach) leaves it, with the gauges, where it was (before, the outbox
gauges read 0 or their last values during an outage with nothing saying they were old).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from app.metrics import SAMPLED_AT
from app.monitoring.sampling import keep_sampling


def sampled_at(name: str) -> float:
    return SAMPLED_AT.labels(name)._value.get()


async def test_the_timestamp_moves_only_with_a_sample_that_succeeds() -> None:
    answers: list[bool] = [False, True, False]
    published: list[int] = []

    async def sample() -> int:
        if not answers.pop(0):
            raise ConnectionRefusedError("the database is out of reach")
        return 1

    before = time.time()
    sampler = asyncio.ensure_future(keep_sampling("test-stale", sample, published.append, 0.05))
    await until(lambda: len(answers) == 2)
    assert sampled_at("test-stale") == 0.0  # the first sample failed
    await until(lambda: published == [1])
    succeeded = sampled_at("test-stale")
    assert succeeded >= before
    await until(lambda: not answers)  # the third failed: the timestamp stays
    await asyncio.sleep(0.01)
    sampler.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampler
    assert sampled_at("test-stale") == succeeded


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "not within the time given"
        await asyncio.sleep(0.001)
