"""A handler failure rolls back that one event; the rest of the batch commits.

Contract: when a handler raises (anything but an infrastructure failure), the
event's own effects (every handler of that consumer for that event) are rolled
back, its dedup row is not written, and it lands in ``failed_event`` for that
consumer with its raw record: reason ``retryable``, status ``retrying`` and
outcome ``RETRIED`` (its record goes to the first retry tier), or, for a
``PermanentError`` or an exception type the handler declared ``non_retryable``,
reason ``non-retryable``, status ``dead`` and outcome ``DEAD_LETTERED`` (its
record goes to the DLT). Its aggregate waits for it: later versions are parked.
The batch's other events, of its own aggregate before it and of other
aggregates, commit. Its retry record, delivered back, applies it and drains
its successors.
"""

from __future__ import annotations

import pytest
from sqlalchemy import insert

from app.context import HandlerContext
from app.errors import PermanentError, RetryableError
from app.metrics import REGISTRY
from app.pipeline.outcomes import Kind
from app.records import headers_from_json
from app.registry import Registry, handler
from dlq.topics import dlt_topic, retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import (
    Db,
    MakeProcessor,
    Outbox,
    effect,
    kinds,
    write_effect,
)


def handler_reruns() -> float:
    """Batches of ``points`` run again because a handler failed, in this process."""
    sample = REGISTRY.get_sample_value(
        "effectively_once_batch_reruns_total", {"consumer": "points", "reason": "handler-failed"}
    )
    return sample or 0.0


async def test_only_the_failing_event_is_rolled_back_and_its_successors_park(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)  # written first, so the rollback has something to undo
        if event.event_id == "a2":
            raise ValueError("points service rejected a2")

    bad = records.event("a2", aggregate_id="o-a", version=2)
    batch = [
        records.event("a1", aggregate_id="o-a", version=1),
        bad,
        records.event("a3", aggregate_id="o-a", version=3),
        records.event("b1", aggregate_id="o-b", version=1),
    ]

    reruns_before = handler_reruns()
    outcomes = await make_processor().process(batch)

    assert kinds(outcomes) == [
        ("a1", Kind.APPLIED),
        ("a2", Kind.RETRIED),
        ("a3", Kind.PARKED),
        ("b1", Kind.APPLIED),
    ]
    assert handler_reruns() - reruns_before == 1  # the batch ran once more, event by event
    assert "ValueError: points service rejected a2" in outcomes[1].error
    assert await db.effects() == ["a1", "b1"]
    assert await db.consumed("points") == ["a1", "b1"]
    assert await db.parked("points") == ["a3"]
    assert await db.version("points", "o-a") == 1
    assert await db.version("points", "o-b") == 1
    [failure] = await db.failed()
    assert failure["consumer_group"] == "points"
    assert failure["event_id"] == "a2"
    assert failure["event_type"] == "OrderPaid"
    assert (failure["aggregate_id"], failure["aggregate_version"]) == ("o-a", 2)
    assert failure["reason"] == "retryable"
    assert (failure["status"], failure["attempts"]) == ("retrying", 1)
    assert failure["exception_type"] == "builtins.ValueError"
    assert failure["exception_message"] == "points service rejected a2"
    assert (failure["topic"], failure["partition"], failure["offset"]) == (
        bad.topic,
        bad.partition,
        bad.offset,
    )
    assert failure["record_value"] == bad.value
    assert failure["record_key"] == bad.key
    assert headers_from_json(failure["record_headers"]) == bad.headers
    [retry] = await outbox.records()
    assert retry.topic == retry_topic(TOPIC, 1)
    assert (retry.key, retry.value) == (bad.key, bad.value)


async def test_a_later_handler_failing_rolls_back_the_earlier_handlers_of_the_same_event(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def first(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def second(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "bad":
            raise RuntimeError("second handler broke")

    outcomes = await make_processor().process(
        [records.event("bad", version=None), records.event("good", version=None)]
    )

    assert kinds(outcomes) == [("bad", Kind.RETRIED), ("good", Kind.APPLIED)]
    assert await db.effects() == ["good"]
    assert [f["event_id"] for f in await db.failed("points")] == ["bad"]


async def test_a_handler_whose_own_statement_violates_a_constraint_fails_alone(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        if event.event_id == "bad":
            # Row 1 already exists: a bug in the handler, not an outage.
            await ctx.session.execute(
                insert(effect).values(id=1, consumer="points", event_id="clash", aggregate_id="x")
            )

    outcomes = await make_processor().process(
        [
            records.event("good", aggregate_id="o-1"),
            records.event("bad", aggregate_id="o-2"),
            records.event("after", aggregate_id="o-3"),
        ]
    )

    assert kinds(outcomes) == [
        ("good", Kind.APPLIED),
        ("bad", Kind.RETRIED),
        ("after", Kind.APPLIED),
    ]
    assert await db.effects() == ["good", "after"]
    [failure] = await db.failed("points")
    assert (failure["event_id"], failure["reason"]) == ("bad", "retryable")
    assert failure["exception_type"] == "sqlalchemy.exc.IntegrityError"


RETRIED = (Kind.RETRIED, "retryable", "retrying", retry_topic(TOPIC, 1))
DEAD = (Kind.DEAD_LETTERED, "non-retryable", "dead", dlt_topic(TOPIC))


@pytest.mark.parametrize(
    ("raised", "declared", "routed"),
    [
        (RetryableError("try later"), (), RETRIED),
        (ValueError("bug"), (), RETRIED),
        (KeyError("missing"), (), RETRIED),
        (PermanentError("never"), (), DEAD),
        (KeyError("missing"), (KeyError,), DEAD),
        (KeyError("missing"), (LookupError,), DEAD),
        (ValueError("bug"), (KeyError,), RETRIED),
    ],
)
async def test_the_failure_reason_follows_the_exception_and_the_declaration(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    raised: Exception,
    declared: tuple[type[BaseException], ...],
    routed: tuple[Kind, str, str, str],
) -> None:
    kind, reason, status, topic = routed

    @handler("OrderPaid", consumer="points", non_retryable=declared, registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        raise raised

    outcomes = await make_processor().process([records.event("e1")])

    assert kinds(outcomes) == [("e1", kind)]
    [failure] = await db.failed("points")
    assert (failure["reason"], failure["status"]) == (reason, status)
    assert [r.topic for r in await outbox.records()] == [topic]
    assert failure["exception_type"].endswith(type(raised).__qualname__)
    assert await db.consumed("points") == []


async def test_the_retry_record_delivered_back_applies_and_drains_its_successors(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    broken = {"e1": True}

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        if broken.get(event.event_id):
            raise RetryableError("not yet")
        await write_effect(event, ctx)

    first = records.event("e1", version=1)
    await make_processor().process([first, records.event("e2", version=2)])
    assert await db.parked("points") == ["e2"]

    [retry] = await outbox.records()
    assert (retry.key, retry.value) == (first.key, first.value)

    broken["e1"] = False  # the retry tier delivers the same bytes later
    outcomes = await make_processor().process([records.delivered(retry)])

    assert kinds(outcomes) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert await db.effects() == ["e1", "e2"]
    assert await db.parked("points") == []
    assert await db.version("points") == 2


async def test_a_parked_successor_that_fails_when_drained_is_recorded_and_unparked(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        if event.event_id == "e2":
            raise ValueError("e2 is broken")

    parked = records.event("e2", version=2)
    await make_processor().process([parked, records.event("e3", version=3)])

    outcomes = await make_processor().process([records.event("e1", version=1)])

    assert kinds(outcomes) == [("e1", Kind.APPLIED), ("e2", Kind.RETRIED)]
    assert await db.effects() == ["e1"]
    assert await db.parked("points") == ["e3"]
    assert await db.version("points") == 1
    [failure] = await db.failed("points")
    assert (failure["event_id"], failure["reason"]) == ("e2", "retryable")
    # The row and the retry record name where e2 first arrived, not the batch that drained it.
    assert (failure["topic"], failure["offset"]) == (parked.topic, parked.offset)
    [retry] = await outbox.records()
    assert (retry.key, retry.value) == (parked.key, parked.value)
    assert dict(retry.headers)["dlt-original-offset"] == str(parked.offset).encode()
