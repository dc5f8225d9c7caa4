"""The prefilter stage: the calls the batch processor makes, before the records are
validated and after each consumer's transaction.

::

    reads, known, skipped = await ask(prefilter, consumers, reads)  # before validation
    todo, skipped = skip_known(known[consumer], consumer, events)   # before it opens
    outcomes = skipped + <dedup, gate, apply, commit> (todo)        # as without Redis
    await remember_applied(prefilter, consumer, batch.applied)      # after it committed

An event Redis knows, by its eventId and the event that id stood for (its aggregate
and version), is one this consumer's database already committed, so the database's
dedup would call it a duplicate too; skipping it changes no outcome. A record whose
id Redis knows for another event (a producer reused the id) is not skipped: the
database dead-letters it. A record that every consumer it is for is known to have
applied is not even validated: its eventId and event are a duplicate for each,
whatever the rest of it says (the database path, validating first, would
dead-letter such a record if its payload were broken; either way nothing applies
twice). A retry or replay record is never skipped: it goes to the database, which
resolves its ``failed_event`` row when it finds the event applied (through another
copy, say).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol

from app.pipeline.decode import Decoded, EventOf, Read
from app.pipeline.outcomes import Kind, Outcome

SKIPPED = "known to the Redis prefilter"
"""The ``detail`` of a ``Duplicate`` the database was not asked about."""

Known = dict[str, dict[str, EventOf]]
"""The eventIds Redis knows each consumer applied, and the event each stood for."""


class Lookup(Protocol):
    """What the stage needs of a ``Prefilter``."""

    async def known(self, consumer: str, event_ids: Sequence[str]) -> dict[str, EventOf]: ...

    async def remember(self, consumer: str, applied: Mapping[str, EventOf]) -> None: ...


async def ask(
    prefilter: Lookup | None, consumers: Sequence[str], reads: list[Read]
) -> tuple[list[Read], Known, list[Outcome]]:
    """Ask Redis, one call per consumer, which eventIds of ``reads`` each applied.

    Returns the reads still to validate (in arrival order), what Redis knows per
    consumer, and ``Duplicate`` outcomes for each consumer of every read that all
    its consumers are known to have applied, as the event it is. A retry or replay
    (for its own consumer alone) is not asked about: it always reaches the database,
    which settles its failure. Without a prefilter, or Redis, nothing is known.
    """
    if prefilter is None or not reads:
        return reads, {}, []
    targets = [_targets(item, consumers) for item in reads]
    ids: dict[str, list[str]] = {consumer: [] for consumer in consumers}
    for item, mine in zip(reads, targets, strict=True):
        if item.event_id is not None and item.trip.consumer is None:
            for consumer in mine:
                ids[consumer].append(item.event_id)
    asked = [consumer for consumer in consumers if ids[consumer]]
    answers = await asyncio.gather(*(prefilter.known(c, ids[c]) for c in asked))
    known: Known = dict(zip(asked, answers, strict=True))
    todo: list[Read] = []
    skipped: list[Outcome] = []
    for item, mine in zip(reads, targets, strict=True):
        event_id = item.event_id
        if (
            event_id is None
            or not mine
            or item.trip.consumer is not None
            or any(event_id not in known.get(c, ()) for c in mine)
            or (event := item.event_of) is None
            or any(known[c][event_id] != event for c in mine)
        ):
            todo.append(item)
            continue
        skipped.extend(Outcome(Kind.DUPLICATE, c, event_id, item.event_type, SKIPPED) for c in mine)
    return todo, known, skipped


def _targets(item: Read, consumers: Sequence[str]) -> Sequence[str]:
    """The consumers ``item`` is for: a retry's or replay's own (if it runs here), else all."""
    target = item.trip.consumer
    if target is None:
        return consumers
    return (target,) if target in consumers else ()


def skip_known(
    known: Mapping[str, EventOf], consumer: str, events: list[Decoded]
) -> tuple[list[Decoded], list[Outcome]]:
    """Split ``events`` into those the transaction must see and ``Duplicate`` outcomes for
    those ``known`` (what Redis knows ``consumer`` applied, from ``ask``), each as the event
    its id stood for; a retry or replay always goes to the transaction."""
    if not known or not events:
        return events, []
    todo: list[Decoded] = []
    skipped: list[Outcome] = []
    for item in events:
        recorded = known.get(item.event_id)
        if recorded is not None and recorded == item.event_of and item.trip.consumer is None:
            event_type = item.event.event_type
            skipped.append(Outcome(Kind.DUPLICATE, consumer, item.event_id, event_type, SKIPPED))
        else:
            todo.append(item)
    return todo, skipped


async def remember_applied(
    prefilter: Lookup | None, consumer: str, applied: Mapping[str, EventOf]
) -> None:
    """Tell Redis which events ``consumer``'s transaction applied (``ConsumerBatch.applied``:
    each ``Applied`` outcome's event, by eventId), each as the event its id stood for.
    Call only once that transaction committed.

    Only an applied event is remembered, the one outcome saying that the transaction
    committed its dedup record: any other (parked, stale, retried, ...) must reach the
    database again when the event is delivered again.
    """
    if prefilter is not None and applied:
        await prefilter.remember(consumer, applied)
