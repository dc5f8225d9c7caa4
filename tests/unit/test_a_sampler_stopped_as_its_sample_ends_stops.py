"""A gauge sampler stops when it is cancelled, even in the instant its sample ends.

Contract (``app.monitoring.sampling.keep_sampling``): cancelling the sampler ends it,
whatever it was waiting for. A relay that cannot run stops its outbox sampler at once,
often while the sampler's first query is answering; a sampler that took that
cancellation for a finished sample would sample on every few seconds, and the relay
process would never exit (its stop waits for the sampler). On Python 3.11,
``asyncio.wait_for`` drops a cancellation that arrives as the awaited work ends; the
sampler's timeout must not.
"""

from __future__ import annotations

import asyncio

from app.monitoring.sampling import keep_sampling

WITHIN = 2.0


async def test_a_sampler_cancelled_as_its_sample_answers_ends() -> None:
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[None] = loop.create_future()
    samples: list[int] = []

    async def sample() -> int:
        await answer
        return len(samples) + 1

    sampler = asyncio.ensure_future(keep_sampling("test", sample, samples.append, 0.05))
    await asyncio.sleep(0.01)  # the first sample waits for its answer
    answer.set_result(None)
    await asyncio.sleep(0)  # the answer is in; the sampler has not resumed yet
    sampler.cancel()

    done, _ = await asyncio.wait([sampler], timeout=WITHIN)
    assert done, f"the sampler ran on after its cancellation: {len(samples)} sample(s)"
    assert sampler.cancelled()
    assert len(samples) <= 1  # the answer that came with the cancellation, at most


async def test_a_sampler_cancelled_while_it_waits_between_samples_ends() -> None:
    samples: list[int] = []

    async def sample() -> int:
        return 1

    sampler = asyncio.ensure_future(keep_sampling("test", sample, samples.append, 10.0))
    await asyncio.sleep(0.01)
    assert samples == [1]
    sampler.cancel()

    done, _ = await asyncio.wait([sampler], timeout=WITHIN)
    assert done and sampler.cancelled()
