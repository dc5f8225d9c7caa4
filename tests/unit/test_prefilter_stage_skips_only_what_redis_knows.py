"""The prefilter stage skips exactly the events Redis knows, and remembers only applied ones.

Contract: ``skip_known`` hands the transaction every event Redis does not know
for that consumer, in arrival order, and turns each known one into a
``Duplicate`` (detail: the prefilter), which is what the database's dedup would
have said; without a prefilter, or when Redis knows nothing, the events pass
untouched and Redis is asked at most once. ``remember_applied`` passes on only
the consumer's ``Applied`` event ids: an event with any other outcome (parked,
stale, retried, ...) must reach the database again when it is delivered again.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.pipeline.decode import Decoded, decode
from app.pipeline.outcomes import Applied, Duplicate, Kind, Outcome
from app.prefilter.stage import SKIPPED, remember_applied, skip_known
from tests.pipeline.events import Records


class KnownSet:
    """A prefilter that knows a fixed set of (consumer, eventId) pairs and records its calls."""

    def __init__(self, *known: tuple[str, str]) -> None:
        self.pairs = set(known)
        self.asked: list[tuple[str, list[str]]] = []
        self.remembered: list[tuple[str, list[str]]] = []

    async def known(self, consumer: str, event_ids: Sequence[str]) -> set[str]:
        self.asked.append((consumer, list(event_ids)))
        return {i for i in event_ids if (consumer, i) in self.pairs}

    async def remember(self, consumer: str, event_ids: Sequence[str]) -> None:
        self.remembered.append((consumer, list(event_ids)))


def events(*event_ids: str) -> list[Decoded]:
    records = Records()
    decoded = [decode(records.event(event_id, version=None)) for event_id in event_ids]
    assert all(isinstance(item, Decoded) for item in decoded)
    return decoded  # type: ignore[return-value]


async def test_known_events_become_duplicates_and_the_rest_go_on_in_order() -> None:
    batch = events("e1", "e2", "e3", "e4")
    prefilter = KnownSet(("points", "e2"), ("points", "e4"), ("inventory", "e1"))

    todo, skipped = await skip_known(prefilter, "points", batch)

    assert [item.event_id for item in todo] == ["e1", "e3"]
    assert skipped == [
        Outcome(Kind.DUPLICATE, "points", "e2", "OrderPaid", SKIPPED),
        Outcome(Kind.DUPLICATE, "points", "e4", "OrderPaid", SKIPPED),
    ]
    assert prefilter.asked == [("points", ["e1", "e2", "e3", "e4"])]


async def test_nothing_known_or_no_prefilter_passes_the_batch_untouched() -> None:
    batch = events("e1", "e2")

    assert await skip_known(KnownSet(), "points", batch) == (batch, [])
    assert await skip_known(None, "points", batch) == (batch, [])


async def test_an_empty_batch_does_not_ask_redis() -> None:
    prefilter = KnownSet()

    assert await skip_known(prefilter, "points", []) == ([], [])
    assert prefilter.asked == []


async def test_only_the_consumers_applied_events_are_remembered() -> None:
    prefilter = KnownSet()
    not_applied = [
        Outcome(k, "points", f"e-{k}", "OrderPaid") for k in Kind if k is not Kind.APPLIED
    ]
    outcomes = [
        Applied("points", "e1", "OrderPaid"),
        *not_applied,
        Applied("inventory", "e6", "OrderPaid"),
        Outcome(Kind.APPLIED, "points", None),
        Applied("points", "e7", "OrderPaid"),
    ]

    await remember_applied(prefilter, "points", outcomes)

    assert prefilter.remembered == [("points", ["e1", "e7"])]


async def test_nothing_applied_means_no_write() -> None:
    prefilter = KnownSet()

    await remember_applied(prefilter, "points", [Duplicate("points", "e2", "OrderPaid")])
    await remember_applied(None, "points", [Applied("points", "e1", "OrderPaid")])

    assert prefilter.remembered == []
