"""A retry tier's batch waits for its due time, and gives itself up as soon as it is not its own.

Contract of ``app.runtime.due.wait_until_due``: it returns at once for records
already due, or without ``retry-due-at``, that it still holds, and raises
``BatchGivenUp`` at once for those it no longer holds, whether any record carries
a due time or not (faust commits past a lone record it no longer tracks, so the
check must not depend on the tier's records carrying one); otherwise it returns
only once the last record of the batch is due, asking ``holds()`` at least every
``CHECK_EVERY_SECONDS`` meanwhile, and raises ``BatchGivenUp`` as soon as
``holds()`` is false (a rebalance took the batch's partitions, or is under way),
without waiting for the due time. A record is due no later than the tier's delay after
its broker timestamp, whatever its ``retry-due-at`` says (a worker's clock ran fast, a
producer wrote it): a record claiming to be due in an hour does not hold up the tier.
(Clock and sleep are the real ones, over fractions of a second.)
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from app.errors import BatchGivenUp
from app.pipeline.pause import CHECK_EVERY_SECONDS
from app.records import RawRecord
from app.runtime.due import wait_until_due
from dlq import headers as h
from dlq.trip import iso


def retry(due_in: float | None, offset: int = 0) -> RawRecord:
    headers: tuple[tuple[str, bytes], ...] = ()
    if due_in is not None:
        due = datetime.now(UTC) + timedelta(seconds=due_in)
        headers = (
            (h.RETRY_DUE_AT, iso(due).encode()),
            (h.RETRY_CONSUMER_GROUP, b"points"),
            (h.DLT_ORIGINAL_TOPIC, b"orders"),
        )
    return RawRecord("orders.retry.5s", 0, offset, b"o-1", b"{}", headers)


async def test_records_already_due_or_without_a_due_time_go_at_once() -> None:
    started = time.monotonic()

    await wait_until_due([retry(None)], lambda: True)
    await wait_until_due([retry(None), retry(-5)], lambda: True)

    assert time.monotonic() - started < 0.1


@pytest.mark.parametrize(
    "due_ins", [[-5], [None], [None, None]], ids=["already-due", "no-due-time", "none-has-one"]
)
async def test_records_no_longer_held_are_given_up_with_or_without_a_due_time(
    due_ins: list[float | None],
) -> None:
    started = time.monotonic()

    with pytest.raises(BatchGivenUp):
        await wait_until_due([retry(d, i) for i, d in enumerate(due_ins)], lambda: False)

    assert time.monotonic() - started < 0.1


async def test_the_batch_waits_for_its_last_record() -> None:
    started = time.monotonic()
    asked = 0

    def holds() -> bool:
        nonlocal asked
        asked += 1
        return True

    await wait_until_due([retry(0.1), retry(0.6, 1)], holds)

    waited = time.monotonic() - started
    assert 0.55 <= waited < 0.6 + 2 * CHECK_EVERY_SECONDS
    assert asked >= 2


async def test_a_batch_that_is_no_longer_held_is_given_up_without_waiting() -> None:
    started = time.monotonic()
    holding = True

    async def rebalance_soon() -> None:
        nonlocal holding
        await asyncio.sleep(0.3)
        holding = False

    rebalance = asyncio.ensure_future(rebalance_soon())
    with pytest.raises(BatchGivenUp, match="a rebalance"):
        await wait_until_due([retry(60)], lambda: holding)
    await rebalance

    assert time.monotonic() - started < 0.3 + 2 * CHECK_EVERY_SECONDS


async def test_a_due_time_beyond_the_tiers_delay_waits_no_longer_than_the_delay() -> None:
    stamped_now = int(datetime.now(UTC).timestamp() * 1000)
    far = retry(3600)._replace(timestamp_ms=stamped_now)
    started = time.monotonic()

    await asyncio.wait_for(wait_until_due([far], lambda: True, tier_delay=0.3), 5)

    assert 0.2 <= time.monotonic() - started < 2
