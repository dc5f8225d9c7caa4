"""The prefilter stage skips exactly the events Redis knows, and remembers what was applied.

Contract: ``ask`` asks Redis once per consumer (for the records that consumer is
for) and hands back, in arrival order, every record that some consumer it is for
is not known to have applied; a record that every one of its consumers applied
becomes a ``Duplicate`` for each of them (detail: the prefilter) without being
validated, when the event Redis keeps for its id (aggregate and version) is the one
the record names. A record reusing a known id for another event is never skipped:
the database dead-letters it. A retry or replay record (for the consumer it names)
is not asked about and always passes: the database settles its failure when it finds
the event applied. Without a prefilter, or when Redis knows nothing, the records
pass untouched; an empty batch asks nothing. ``skip_known`` hands a consumer's
transaction every event not known for it, and every retry or replay, in arrival
order, and turns each other known one (as that event) into a ``Duplicate``, which is
what the database's dedup would have said. ``remember_applied`` passes on what a
consumer's transaction applied, each event with its aggregate and version, and
writes nothing when it applied nothing (which events those are is the consumer
batch's: ``tests/pipeline/test_redis_learns_each_applied_event_as_its_dedup_record_names_it.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from app.pipeline.decode import Decoded, EventOf, Read, decode, read
from app.pipeline.outcomes import Kind, Outcome
from app.prefilter.stage import SKIPPED, ask, remember_applied, skip_known
from app.records import RawRecord
from tests.pipeline.events import Records, envelope

ORDER_1: EventOf = ("Order", "o-1", 1)
"""The event ``Records.event`` makes by default: aggregate Order o-1, version 1."""
UNVERSIONED: EventOf = ("Order", "o-1", None)


class KnownSet:
    """A prefilter that knows a fixed set of (consumer, eventId) pairs, each as ``ORDER_1``
    or the event a third item names, and records its calls."""

    def __init__(self, *known: tuple[str, str] | tuple[str, str, EventOf]) -> None:
        self.events = {(pair[0], pair[1]): pair[2] if len(pair) == 3 else ORDER_1 for pair in known}
        self.asked: list[tuple[str, list[str]]] = []
        self.remembered: list[tuple[str, dict[str, EventOf]]] = []

    async def known(self, consumer: str, event_ids: Sequence[str]) -> dict[str, EventOf]:
        self.asked.append((consumer, list(event_ids)))
        return {i: self.events[consumer, i] for i in event_ids if (consumer, i) in self.events}

    async def remember(self, consumer: str, applied: Mapping[str, EventOf]) -> None:
        self.remembered.append((consumer, dict(applied)))


def events(*event_ids: str) -> list[Decoded]:
    records = Records()
    decoded = [decode(records.event(event_id, version=None)) for event_id in event_ids]
    assert all(isinstance(item, Decoded) for item in decoded)
    return decoded  # type: ignore[return-value]


def reads(*records: RawRecord) -> list[Read]:
    items = [read(record) for record in records]
    assert all(isinstance(item, Read) for item in items)
    return items  # type: ignore[return-value]


CONSUMERS = ("inventory", "points")


async def test_records_every_consumer_applied_are_duplicates_without_validation() -> None:
    records = Records()
    broken = records.raw(
        b'{"eventId": "e2", "eventType": "OrderPaid", "aggregateType": "Order",'
        b' "aggregateId": "o-1", "aggregateVersion": "1", "data": 7}'
    )
    batch = reads(records.event("e1"), broken, records.event("e3"), records.event("e4"))
    prefilter = KnownSet(
        ("points", "e2"),
        ("inventory", "e2"),
        ("points", "e3"),
        ("inventory", "e4"),
        ("points", "e4"),
    )

    todo, known, skipped = await ask(prefilter, CONSUMERS, batch)

    assert [item.event_id for item in todo] == ["e1", "e3"]
    assert known == {
        "inventory": {"e2": ORDER_1, "e4": ORDER_1},
        "points": {"e2": ORDER_1, "e3": ORDER_1, "e4": ORDER_1},
    }
    assert skipped == [
        Outcome(Kind.DUPLICATE, c, event_id, "OrderPaid", SKIPPED)
        for event_id in ("e2", "e4")
        for c in CONSUMERS
    ]
    assert sorted(prefilter.asked) == [(c, ["e1", "e2", "e3", "e4"]) for c in CONSUMERS]


AIMED_AT_POINTS = (("dlt-original-topic", b"orders"), ("retry-consumer-group", b"points"))
AIMED_AT_BILLING = (("dlt-original-topic", b"orders"), ("retry-consumer-group", b"billing"))


async def test_a_retry_is_never_asked_about_and_always_reaches_the_database() -> None:
    records = Records()
    retry = records.event("e1")._replace(headers=AIMED_AT_POINTS)
    elsewhere = records.event("e2")._replace(headers=AIMED_AT_BILLING)
    main = records.event("e3")
    prefilter = KnownSet(
        ("points", "e1"), ("billing", "e2"), ("inventory", "e2"), *((c, "e3") for c in CONSUMERS)
    )

    todo, _, skipped = await ask(prefilter, CONSUMERS, reads(retry, elsewhere, main))

    assert [item.event_id for item in todo] == ["e1", "e2"]
    assert skipped == [Outcome(Kind.DUPLICATE, c, "e3", "OrderPaid", SKIPPED) for c in CONSUMERS]
    assert sorted(prefilter.asked) == [(c, ["e3"]) for c in CONSUMERS]


def test_a_consumer_hands_a_known_retry_to_its_transaction() -> None:
    records = Records()
    retry = decode(records.event("e1")._replace(headers=AIMED_AT_POINTS))
    assert isinstance(retry, Decoded)
    main = events("e2")

    todo, skipped = skip_known({"e1": ORDER_1, "e2": UNVERSIONED}, "points", [retry, *main])

    assert todo == [retry]
    assert skipped == [Outcome(Kind.DUPLICATE, "points", "e2", "OrderPaid", SKIPPED)]


async def test_nothing_known_no_prefilter_or_an_empty_batch_passes_untouched() -> None:
    records = Records()
    batch = reads(records.event("e1"), records.raw(b'{"eventType": "OrderPaid"}'))
    prefilter = KnownSet(("points", "e1"))

    assert await ask(KnownSet(), CONSUMERS, batch) == (batch, {c: {} for c in CONSUMERS}, [])
    assert await ask(None, CONSUMERS, batch) == (batch, {}, [])
    assert await ask(prefilter, CONSUMERS, []) == ([], {}, [])
    assert prefilter.asked == []


def test_a_consumer_skips_the_events_known_for_it_in_order() -> None:
    batch = events("e1", "e2", "e3", "e4")

    todo, skipped = skip_known({"e2": UNVERSIONED, "e4": UNVERSIONED}, "points", batch)

    assert [item.event_id for item in todo] == ["e1", "e3"]
    assert skipped == [
        Outcome(Kind.DUPLICATE, "points", "e2", "OrderPaid", SKIPPED),
        Outcome(Kind.DUPLICATE, "points", "e4", "OrderPaid", SKIPPED),
    ]
    assert skip_known({}, "points", batch) == (batch, [])


async def test_what_the_transaction_applied_is_remembered_with_its_events() -> None:
    prefilter = KnownSet()

    await remember_applied(prefilter, "points", {"e1": ORDER_1, "e7": UNVERSIONED})

    assert prefilter.remembered == [("points", {"e1": ORDER_1, "e7": UNVERSIONED})]


async def test_nothing_applied_means_no_write() -> None:
    prefilter = KnownSet()

    await remember_applied(prefilter, "points", {})
    await remember_applied(None, "points", {"e1": ORDER_1})

    assert prefilter.remembered == []


async def test_a_known_id_reused_for_another_event_is_never_skipped() -> None:
    records = Records()
    other_aggregate = records.event("e1", aggregate_id="o-9")
    other_version = records.event("e2", version=2)
    numeric = records.raw(orjson.dumps(envelope("e3", aggregate_id=7)), key=b"7")  # type: ignore[arg-type]
    same = records.event("e4")
    prefilter = KnownSet(
        *((c, "e1") for c in CONSUMERS),
        *((c, "e2") for c in CONSUMERS),
        *((c, "e3", ("Order", "7", 1)) for c in CONSUMERS),
        ("points", "e4"),
        ("inventory", "e4", ("Order", "o-1", 2)),
    )

    todo, known, skipped = await ask(
        prefilter, CONSUMERS, reads(other_aggregate, other_version, numeric, same)
    )

    assert [item.event_id for item in todo] == ["e1", "e2", "e4"]
    assert skipped == [Outcome(Kind.DUPLICATE, c, "e3", "OrderPaid", SKIPPED) for c in CONSUMERS]
    decoded = [decode(item.record) for item in todo]
    assert all(isinstance(item, Decoded) for item in decoded)
    for consumer in CONSUMERS:
        left, known_here = skip_known(known[consumer], consumer, decoded)  # type: ignore[arg-type]
        expected = ["e1", "e2"] if consumer == "points" else ["e1", "e2", "e4"]
        assert [item.event_id for item in left] == expected
        assert [o.event_id for o in known_here] == ([] if consumer == "inventory" else ["e4"])
