"""The prefilter stage: the two calls the batch processor makes, one on each side
of a consumer's transaction.

::

    todo, skipped = await skip_known(prefilter, consumer, events)   # before it opens
    outcomes = skipped + <dedup, gate, apply, commit> (todo)        # as without Redis
    await remember_applied(prefilter, consumer, outcomes)           # after it committed

An event Redis knows is one this consumer's database already committed, so the
database's dedup would call it a duplicate too; skipping it changes no outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.pipeline.decode import Decoded
from app.pipeline.outcomes import Kind, Outcome

SKIPPED = "known to the Redis prefilter"
"""The ``detail`` of a ``Duplicate`` the database was not asked about."""


class Lookup(Protocol):
    """What the stage needs of a ``Prefilter``."""

    async def known(self, consumer: str, event_ids: Sequence[str]) -> set[str]: ...

    async def remember(self, consumer: str, event_ids: Sequence[str]) -> None: ...


async def skip_known(
    prefilter: Lookup | None, consumer: str, events: list[Decoded]
) -> tuple[list[Decoded], list[Outcome]]:
    """Split ``events`` into those the transaction must see and ``Duplicate`` outcomes for
    those Redis knows ``consumer`` applied. Without a prefilter, or Redis, nothing is skipped."""
    if prefilter is None or not events:
        return events, []
    known = await prefilter.known(consumer, [item.event_id for item in events])
    if not known:
        return events, []
    todo = [item for item in events if item.event_id not in known]
    skipped = [
        Outcome(Kind.DUPLICATE, consumer, item.event_id, item.event.event_type, SKIPPED)
        for item in events
        if item.event_id in known
    ]
    return todo, skipped


async def remember_applied(
    prefilter: Lookup | None, consumer: str, outcomes: Sequence[Outcome]
) -> None:
    """Tell Redis which events ``consumer`` applied. Call only once their transaction committed.

    Only ``Applied`` is remembered, the one outcome saying that the transaction
    committed the event: any other (parked, stale, retried, ...) must reach the
    database again when the event is delivered again.
    """
    if prefilter is None:
        return
    applied = [
        o.event_id
        for o in outcomes
        if o.kind is Kind.APPLIED and o.consumer == consumer and o.event_id is not None
    ]
    if applied:
        await prefilter.remember(consumer, applied)
