"""``close_within``: the consumer's close ends, however aiokafka's close ends.

Contract: a cancellation that the close raises of its own (aiokafka's fetcher awaits
the tasks it cancelled) ends the close quietly; a close that outlasts the bound is left
(a warning); a cancellation of the closing task itself still cancels it.
"""

from __future__ import annotations

import asyncio

import pytest

from app.runtime.consumer_close import close_within


async def test_a_cancellation_the_close_lets_escape_ends_it() -> None:
    async def close() -> None:
        inner = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        inner.cancel()
        await inner  # as aiokafka's Fetcher.close does

    await close_within(close)  # returns: nothing escapes


async def test_a_close_that_hangs_is_left_after_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()

    await close_within(lambda: asyncio.sleep(30), within=0.2)

    assert loop.time() - started < 2
    assert "did not close within" in caplog.text


async def test_the_closing_task_cancelled_is_cancelled() -> None:
    closing = asyncio.ensure_future(close_within(lambda: asyncio.sleep(30)))
    await asyncio.sleep(0.05)
    closing.cancel()

    with pytest.raises(asyncio.CancelledError):
        await closing
