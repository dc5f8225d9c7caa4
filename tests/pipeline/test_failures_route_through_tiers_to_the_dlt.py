"""A failing event climbs the retry tiers one attempt at a time, then lands in the DLT.

Contract: with tiers ``(1 s, 5 s)`` and a handler that always fails, the
event's first run publishes its record to ``<topic>.retry.1s`` for its
consumer (attempt 1, due one second after the clock's now); that record,
delivered back from the tier, fails again and goes to ``.retry.5s`` (attempt
2); delivered back once more it goes to ``.DLT`` with reason
``retries-exhausted`` and ``dlt-attempts`` 3. Its ``failed_event`` row, keyed
by the record's ORIGINAL topic, partition and offset, stays one row whose
status moves ``retrying`` → ``dead`` and whose attempts count 1, 2, 3. A
retry record is run only by the consumer it names: the others are not run
again. The failing handler is called once per attempt (three here), not once more in
the batch's event-by-event rerun. A ``PermanentError`` or a type the handler declared
``non_retryable`` goes straight to the DLT (reason ``non-retryable``), through no tier.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.context import HandlerContext
from app.errors import PermanentError
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.topics import dlt_topic, retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import (
    NOW,
    Db,
    FrozenClock,
    MakeProcessor,
    Outbox,
    header_map,
    kinds,
    write_effect,
)

DELAYS = (1.0, 5.0)
TIER_1, TIER_2, DLT = retry_topic(TOPIC, 1), retry_topic(TOPIC, 5), dlt_topic(TOPIC)


def register(registry: Registry, calls: list[tuple[str, str]]) -> None:
    """``points`` always fails; ``notification`` always succeeds."""

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        raise ValueError("points service says no")

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        await write_effect(event, ctx)


async def test_an_always_failing_event_goes_tier_by_tier_to_the_dlt(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    clock: FrozenClock,
) -> None:
    calls: list[tuple[str, str]] = []
    register(registry, calls)
    processor = make_processor(delays=DELAYS)
    main = records.event("e1")

    first = await processor.process([main])

    assert kinds(first, "points") == [("e1", Kind.RETRIED)]
    assert kinds(first, "notification") == [("e1", Kind.APPLIED)]
    [to_tier_1] = await outbox.records()
    assert to_tier_1.topic == TIER_1
    assert (to_tier_1.key, to_tier_1.value) == (main.key, main.value)
    headers = header_map(to_tier_1)
    assert headers["retry-consumer-group"] == "points"
    assert headers["retry-attempt"] == "1"
    assert headers["retry-first-failure-at"] == "2024-05-01T12:00:00.000Z"
    assert headers["retry-due-at"] == "2024-05-01T12:00:01.000Z"
    [row] = await db.failed("points")
    assert (row["status"], row["attempts"], row["reason"]) == ("retrying", 1, "retryable")
    assert (row["topic"], row["partition"], row["offset"]) == (main.topic, 0, main.offset)

    clock.advance(1)
    second = await processor.process([records.delivered(to_tier_1)])

    assert kinds(second) == [("e1", Kind.RETRIED)]
    assert second[0].consumer == "points"
    to_tier_2 = (await outbox.records())[-1]
    assert to_tier_2.topic == TIER_2
    headers = header_map(to_tier_2)
    assert (headers["retry-consumer-group"], headers["retry-attempt"]) == ("points", "2")
    assert headers["retry-first-failure-at"] == "2024-05-01T12:00:00.000Z"
    assert headers["retry-due-at"] == "2024-05-01T12:00:06.000Z"
    [row] = await db.failed("points")
    assert (row["status"], row["attempts"]) == ("retrying", 2)

    clock.advance(5)
    third = await processor.process([records.delivered(to_tier_2)])

    assert kinds(third) == [("e1", Kind.DEAD_LETTERED)]
    assert third[0].consumer == "points"
    dead = (await outbox.records())[-1]
    assert dead.topic == DLT
    assert (dead.key, dead.value) == (main.key, main.value)
    headers = header_map(dead)
    assert headers["dlt-reason"] == "retries-exhausted"
    assert headers["dlt-attempts"] == "3"
    assert headers["dlt-consumer-group"] == "points"
    assert headers["dlt-original-topic"] == TOPIC
    assert headers["dlt-original-offset"] == str(main.offset)
    assert (headers["dlt-first-failure-at"], headers["dlt-last-failure-at"]) == (
        "2024-05-01T12:00:00.000Z",
        "2024-05-01T12:00:06.000Z",
    )
    assert [r.topic for r in await outbox.records()] == [TIER_1, TIER_2, DLT]

    [row] = await db.failed()
    assert (row["consumer_group"], row["status"], row["attempts"]) == ("points", "dead", 3)
    assert row["reason"] == "retries-exhausted"
    assert (row["topic"], row["partition"], row["offset"]) == (main.topic, 0, main.offset)
    assert row["first_failed_at"].replace(tzinfo=NOW.tzinfo) == NOW
    assert row["last_failed_at"].replace(tzinfo=NOW.tzinfo) == NOW + timedelta(seconds=6)
    # Only the consumer the retry records name ran them; notification applied e1 once.
    assert calls.count(("notification", "e1")) == 1
    # The failing handler ran once per attempt: the batch's event-by-event rerun after
    # its failure routes the event with that failure rather than calling it again.
    assert calls.count(("points", "e1")) == 3
    assert {consumer for consumer, _ in calls} == {"notification", "points"}
    assert await db.effects("notification") == ["e1"]
    assert await db.consumed("points") == []


@pytest.mark.parametrize(
    ("raised", "declared"),
    [
        (PermanentError("never"), ()),
        (KeyError("sku"), (KeyError,)),
        (KeyError("sku"), (LookupError,)),
    ],
)
async def test_a_non_retryable_failure_goes_straight_to_the_dlt(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    raised: Exception,
    declared: tuple[type[BaseException], ...],
) -> None:
    @handler("OrderPaid", consumer="points", non_retryable=declared, registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        raise raised

    outcomes = await make_processor(delays=DELAYS).process([records.event("e1")])

    assert kinds(outcomes) == [("e1", Kind.DEAD_LETTERED)]
    [dead] = await outbox.records()
    assert dead.topic == DLT
    headers = header_map(dead)
    assert (headers["dlt-reason"], headers["dlt-attempts"]) == ("non-retryable", "1")
    assert headers["dlt-exception-type"].endswith(type(raised).__qualname__)
    [row] = await db.failed("points")
    assert (row["status"], row["attempts"], row["reason"]) == ("dead", 1, "non-retryable")


async def test_without_tiers_a_retryable_failure_goes_straight_to_the_dlt(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    register(registry, [])

    outcomes = await make_processor(delays=()).process([records.event("e1")])

    assert kinds(outcomes, "points") == [("e1", Kind.DEAD_LETTERED)]
    [dead] = await outbox.records()
    assert (dead.topic, header_map(dead)["dlt-reason"]) == (DLT, "retries-exhausted")
    [row] = await db.failed("points")
    assert (row["status"], row["attempts"]) == ("dead", 1)
