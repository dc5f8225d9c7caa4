"""An operator's skip lets an aggregate move on without its dead event.

Contract: a dead-lettered version 1 keeps its aggregate's version 2 parked.
A skip record (what ``python -m dlq skip`` publishes: the DLT record's key and
value on the original topic, with ``retry-consumer-group: <consumer>`` and
``retry-action: skip``) takes version 1 for that consumer without running any
of its handlers (outcome ``SKIPPED``), which drains version 2 (``APPLIED``);
the ``failed_event`` row becomes ``skipped``. Other consumers are not run.
From then on the skipped event is a ``DUPLICATE`` for that consumer: replaying
it (any number of times) or redelivering it runs no handler and leaves the row
``skipped``. Readable poison, skipped for a consumer an operator named, settles
its own row (consumer ``''``) the same way: ``skip-requested`` (the operator's
decision) becomes ``skipped``, the final status retention deletes in time, the
decision kept; a poison row in any other status is a later decision and stays.
Poison whose envelope cannot be read (an eventId that is a float) but whose dead-letter
headers name its aggregate and version holds its successor back too: a skip of it for a
consumer (``dlq skip --for-consumer``) publishes a skip record of that version, which the
consumer takes, draining the successor, and the poison's row is ``skipped`` (before, the
skip only marked the row and said it held nothing back: the successor stayed parked, and
``release`` refused the failed version, with no way out).
"""

from __future__ import annotations

import orjson

from app.context import HandlerContext
from app.errors import PermanentError
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.actions import Action, plan
from dlq.dead import DeadLetter, FailureState, FailureStatus
from dlq.records import replay_record
from dlq.selection import Entry
from dlq.status import FailureStore
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import Db, MakeProcessor, Outbox, kinds, write_effect
from tests.unit.test_dlq_cli_decides_before_it_publishes import executor, ignore


async def test_a_skip_takes_the_dead_version_without_its_handler_and_drains_the_next(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    broken = {"e1"}
    calls: list[tuple[str, str]] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        if event.event_id in broken:
            raise PermanentError("order o-1 has no points account")
        await write_effect(event, ctx)

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        await write_effect(event, ctx)

    main = records.event("e1", version=1)
    first = await make_processor().process([main, records.event("e2", version=2)])
    assert kinds(first, "points") == [("e1", Kind.DEAD_LETTERED), ("e2", Kind.PARKED)]
    [dead] = await outbox.records()
    assert dead.topic == dlt_topic(TOPIC)
    assert await db.parked("points") == ["e2"]

    # The operator gives up on e1 for points; e1 itself would now succeed.
    broken.clear()
    calls.clear()
    from_the_dlt = records.delivered(dead)
    skip = records.delivered(replay_record(from_the_dlt, skip=True))
    assert (skip.topic, skip.header("retry-consumer-group"), skip.header("retry-action")) == (
        TOPIC,
        b"points",
        b"skip",
    )

    outcomes = await make_processor().process([skip])

    assert [(o.consumer, o.event_id, o.kind) for o in outcomes] == [
        ("points", "e1", Kind.SKIPPED),
        ("points", "e2", Kind.APPLIED),
    ]
    assert calls == [("points", "e2")]
    assert await db.effects("points") == ["e2"]
    assert await db.parked("points") == []
    assert await db.consumed("points") == ["e1", "e2"]
    assert await db.version("points") == 2
    [row] = await db.failed("points")
    assert (row["event_id"], row["status"]) == ("e1", "skipped")
    assert (row["topic"], row["offset"]) == (main.topic, main.offset)

    # Replayed twice, and redelivered as it first arrived: applied never, never run.
    again = [
        await make_processor().process([records.delivered(replay_record(from_the_dlt))]),
        await make_processor().process([records.delivered(replay_record(from_the_dlt))]),
        await make_processor().process([records.again(main)]),
    ]

    assert [kinds(o, "points") for o in again] == [[("e1", Kind.DUPLICATE)]] * 3
    assert calls == [("points", "e2")]
    assert await db.effects("points") == ["e2"]
    assert await db.effects("notification") == ["e1", "e2"]
    [row] = await db.failed("points")
    assert row["status"] == "skipped"
    assert len(await outbox.records()) == 1


async def test_a_skip_of_readable_poison_settles_the_poisons_own_row(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    for consumer in ("points", "notification"):
        handler("OrderPaid", consumer=consumer, registry=registry)(write_effect)
    broken = envelope("e1", version=1, data={"orderId": "o-1", "userId": "u-1", "amount": "-5"})
    poison = records.raw(orjson.dumps(broken))
    await make_processor().process([poison, records.event("e2", version=2)])
    [dead] = await outbox.to(dlt_topic(TOPIC))
    from_the_dlt = records.delivered(dead)
    key = ("", TOPIC, poison.partition, poison.offset)

    async def poison_row() -> tuple[str, str | None, str | None]:
        [row] = await db.failed("")
        return row["status"], row["decided_by"], row["decision_note"]

    async def skip_for(consumer: str) -> None:
        out = replay_record(from_the_dlt, skip=True, consumer=consumer)
        outcomes = await make_processor().process([records.delivered(out)])
        assert kinds(outcomes, consumer) == [("e1", Kind.SKIPPED), ("e2", Kind.APPLIED)]

    # A skip while the row holds no skip decision (still dead): the row is left as it is.
    await skip_for("points")
    assert await poison_row() == ("dead", None, None)

    # What ``python -m dlq skip P:O --for-consumer notification --execute`` writes first.
    seen = FailureState(FailureStatus.DEAD)
    decided = await FailureStore(db.engine, "test").decide(
        key, seen, FailureStatus.SKIP_REQUESTED, "ops", "garbled upstream"
    )
    assert decided
    assert await poison_row() == ("skip-requested", "ops", "garbled upstream")

    await skip_for("notification")

    assert await poison_row() == ("skipped", "ops", "garbled upstream")
    assert await db.failed("points") == await db.failed("notification") == []


async def test_a_skip_takes_the_version_of_poison_whose_envelope_failed(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    """An envelope that fails (no ``eventVersion``, the aggregate only in the key, the
    version as text, as a Go producer may send them) still names its event, aggregate and
    version: the DLT record and the poison's row say so, its successor parks behind it,
    and a skip for a consumer takes that version for it, which drains the successor."""
    for consumer in ("points", "notification"):
        handler("OrderPaid", consumer=consumer, registry=registry)(write_effect)
    broken = envelope("e2", version=None, aggregateVersion="2")
    del broken["eventVersion"], broken["aggregateId"]
    poison = records.raw(orjson.dumps(broken), key=b"o-1")
    await make_processor().process([records.event("e1", version=1)])
    first = await make_processor().process([poison, records.event("e3", version=3)])

    assert kinds(first) == [("e2", Kind.POISON), ("e3", Kind.PARKED), ("e3", Kind.PARKED)]
    [dead] = await outbox.to(dlt_topic(TOPIC))
    headers = {name: value.decode() for name, value in dead.headers}
    assert (
        headers["dlt-event-id"],
        headers["dlt-aggregate-type"],
        headers["dlt-aggregate-id"],
        headers["dlt-aggregate-version"],
    ) == ("e2", "Order", "o-1", "2")
    [row] = await db.failed("")
    assert (row["aggregate_type"], row["aggregate_id"], row["aggregate_version"]) == (
        "Order",
        "o-1",
        2,
    )

    skip = replay_record(records.delivered(dead), skip=True, consumer="points")
    outcomes = await make_processor().process([records.delivered(skip)])

    assert kinds(outcomes, "points") == [("e2", Kind.SKIPPED), ("e3", Kind.APPLIED)]
    assert await db.version("points") == 3
    assert await db.parked("notification") == ["e3"]  # skipped for points only


async def test_a_skip_of_unreadable_poison_that_names_its_version_takes_that_version(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    for consumer in ("points", "notification"):
        handler("OrderPaid", consumer=consumer, registry=registry)(write_effect)
    broken = envelope("e2", version=2)
    broken["eventId"] = 600101.5  # a Java double: no id
    poison = records.raw(orjson.dumps(broken), key=b"o-1")
    await make_processor().process([records.event("e1", version=1)])
    first = await make_processor().process([poison, records.event("e3", version=3)])
    assert ("e3", Kind.PARKED) in kinds(first, "points")
    [dead_record] = await outbox.to(dlt_topic(TOPIC))
    dead = DeadLetter.of(records.delivered(dead_record))
    assert dead.is_poison and not dead.has_envelope and dead.holds_a_version, dead

    todo = plan([Entry(dead, FailureState("dead"))], Action.SKIP, for_consumers=["points"])
    run, sender, rows = executor(Action.SKIP)
    summary = await run.run(todo.act, ignore)

    assert not summary.errors and not todo.settle
    [(skip, _)] = sender.sent
    assert [state.status for state in rows.status.values()] == [FailureStatus.SKIPPED]
    outcomes = await make_processor().process([records.delivered(skip)])
    assert kinds(outcomes, "points")[-1] == ("e3", Kind.APPLIED)
    assert await db.version("points") == 3
    assert await db.parked("notification") == ["e3"]  # skipped for points only
