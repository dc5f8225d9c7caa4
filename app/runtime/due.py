"""A retry tier's batch waits for its records' due time without holding up a rebalance.

A retry record is never run before its ``retry-due-at``, so a tier's batch may
wait minutes. faust waits for every message it delivered to be acked before
it lets a rebalance go on; a batch that slept through it kept the member from
rejoining until it was evicted. So the wait checks, several times a second,
that the batch is still this worker's (``Intake.holds``: no rebalance under
way, the assignment it was delivered in still current); once it is not, the
batch is given up (``BatchGivenUp``): withheld, not processed and not acked,
so that the partition's next owner reads it again from the committed offset
and waits for it in turn. Nothing of it took effect, so nothing is lost and
nothing applies twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

from app.pipeline.pause import sleep_while_held
from app.records import RawRecord
from dlq.trip import due_at

LOGGED_WAIT_SECONDS = 1.0
log = logging.getLogger("effectively_once.worker")


async def wait_until_due(
    records: Sequence[RawRecord],
    holds: Callable[[], bool],
    tier_delay: float | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Return once the last of ``records`` is due; ``BatchGivenUp`` as soon as ``holds()``
    is false meanwhile, and before returning (also for records without a due time: faust
    commits past a lone record it no longer tracks). A tier's records come in due order, so
    waiting for the batch's last one delays the others by at most the batch wait.

    ``tier_delay``: a record is due ``tier_delay`` seconds after the broker stamped it at
    the latest, whatever its ``retry-due-at`` says (written by a worker whose clock ran
    fast, or by a producer): one record due in a day would hold up its whole tier."""
    due = [when for record in records if (when := _capped(record, tier_delay)) is not None]
    wait = (max(due) - now()).total_seconds() if due else 0.0
    if wait >= LOGGED_WAIT_SECONDS:
        log.info("%s: %d record(s) due in %.0fs", records[0].topic, len(records), wait)

    def given_up(left: float) -> str:
        waited = f" {left:.0f}s" if left > 0 else ""
        return f"a rebalance while {len(records)} record(s) waited{waited}"

    await sleep_while_held(max(wait, 0.0), holds, given_up, sleep)


def _capped(record: RawRecord, tier_delay: float | None) -> datetime | None:
    """``record``'s due time, no later than its broker timestamp plus ``tier_delay``."""
    when = due_at(record)
    if when is None or tier_delay is None or record.timestamp_ms is None:
        return when
    latest = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC) + timedelta(seconds=tier_delay)
    return min(when, latest)
