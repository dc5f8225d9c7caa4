"""Where a failed event goes next is a pure function of policy, attempt, error and clock.

Contract: ``route(policy, attempts, retryable, now)`` after the ``attempts``-th
failed run (the first run counts as 1) sends a retryable failure to the tier
of ``delays[attempts - 1]`` (``<base>.retry.<label>``), due at ``now`` plus that
delay, and once the tiers are used up to ``<base>.DLT`` with reason
``retries-exhausted``; a non-retryable failure goes to the DLT at once with
reason ``non-retryable``. No tiers at all: every failure goes straight to the
DLT. ``attempts < 1`` is rejected. The same inputs always give the same route
(the real clock is never read). ``FailureRouter`` applies it with its injected
clock, counting the attempts a record's headers say it already had.
Tier labels use the largest whole unit (``1s``, ``5m``, ``1h``), else seconds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from app.errors import PermanentError
from app.pipeline.apply import HandlerFailed
from app.pipeline.decode import Decoded, Poison, decode
from app.pipeline.outcomes import Kind
from app.pipeline.route import FailureRouter
from app.records import RawRecord
from app.registry import HandlerSpec
from dlq.policy import DeadReason, RetryPolicy, Route, route
from dlq.topics import delay_label, dlt_topic, retry_topic, retry_topics

BASE = "order-event-topic"
# Far from today, so a route computed from the real clock could not pass.
NOW = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)
TIERS = (1.0, 5.0, 30.0, 300.0)
DLT = f"{BASE}.DLT"


def tier(topic_suffix: str, attempts: int, delay: float) -> Route:
    return Route(f"{BASE}.retry.{topic_suffix}", attempts, due_at=NOW + timedelta(seconds=delay))


def dead(attempts: int, reason: DeadReason) -> Route:
    return Route(DLT, attempts, dead=reason)


EXHAUSTED = DeadReason.RETRIES_EXHAUSTED
NON_RETRYABLE = DeadReason.NON_RETRYABLE

ROUTES = [
    (TIERS, 1, True, tier("1s", 1, 1)),
    (TIERS, 2, True, tier("5s", 2, 5)),
    (TIERS, 3, True, tier("30s", 3, 30)),
    (TIERS, 4, True, tier("5m", 4, 300)),
    (TIERS, 5, True, dead(5, EXHAUSTED)),
    (TIERS, 9, True, dead(9, EXHAUSTED)),
    (TIERS, 1, False, dead(1, NON_RETRYABLE)),
    (TIERS, 3, False, dead(3, NON_RETRYABLE)),
    (TIERS, 5, False, dead(5, NON_RETRYABLE)),
    ((1.0, 5.0), 2, True, tier("5s", 2, 5)),
    ((1.0, 5.0), 3, True, dead(3, EXHAUSTED)),
    ((0.5,), 1, True, tier("0.5s", 1, 0.5)),
    ((0.5,), 2, True, dead(2, EXHAUSTED)),
    ((), 1, True, dead(1, EXHAUSTED)),
    ((), 1, False, dead(1, NON_RETRYABLE)),
]


@pytest.mark.parametrize(("delays", "attempts", "retryable", "expected"), ROUTES)
def test_the_next_stop(
    delays: tuple[float, ...], attempts: int, retryable: bool, expected: Route
) -> None:
    assert route(RetryPolicy(BASE, delays), attempts, retryable, NOW) == expected


@pytest.mark.parametrize("attempts", [0, -1])
def test_attempts_count_from_one(attempts: int) -> None:
    with pytest.raises(ValueError, match="attempts"):
        route(RetryPolicy(BASE, TIERS), attempts, True, NOW)


def test_the_same_inputs_give_the_same_route() -> None:
    policy = RetryPolicy(BASE, TIERS)

    assert route(policy, 2, True, NOW) == route(policy, 2, True, NOW)
    later = NOW + timedelta(hours=1)
    assert route(policy, 2, True, later).due_at == later + timedelta(seconds=5)


@pytest.mark.parametrize(
    ("seconds", "label"),
    [
        (1, "1s"),
        (5.0, "5s"),
        (30, "30s"),
        (59, "59s"),
        (60, "1m"),
        (90, "90s"),
        (300, "5m"),
        (5400, "90m"),
        (3600, "1h"),
        (7200.0, "2h"),
        (0.5, "0.5s"),
        (1.5, "1.5s"),
    ],
)
def test_delay_labels(seconds: float, label: str) -> None:
    assert delay_label(seconds) == label


def test_topic_names() -> None:
    assert retry_topic(BASE, 1) == "order-event-topic.retry.1s"
    assert retry_topic(BASE, 300) == "order-event-topic.retry.5m"
    assert dlt_topic(BASE) == "order-event-topic.DLT"
    assert retry_topics(BASE, TIERS) == [
        "order-event-topic.retry.1s",
        "order-event-topic.retry.5s",
        "order-event-topic.retry.30s",
        "order-event-topic.retry.5m",
    ]
    assert retry_topics(BASE, ()) == []


# FailureRouter: the same function, fed by the record's headers and the injected clock.


def event_record(headers: tuple[tuple[str, bytes], ...] = ()) -> RawRecord:
    env = {
        "eventId": "e-1",
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-1",
        "aggregateVersion": 1,
        "occurredAt": "2024-05-01T12:00:00Z",
        "data": {"orderId": "o-1", "userId": "u-1", "amount": "1", "paidAt": "2024-05-01T12:00Z"},
    }
    return RawRecord(BASE, 0, 7, b"o-1", orjson.dumps(env), headers)


def decoded(record: RawRecord) -> Decoded:
    result = decode(record)
    assert isinstance(result, Decoded)
    return result


def failure(cause: BaseException) -> HandlerFailed:
    async def fn(event: Any, ctx: Any) -> None:  # pragma: no cover - never called
        pass

    return HandlerFailed(HandlerSpec("OrderPaid", "points", fn), cause)


ROUTER = FailureRouter(RetryPolicy(BASE, (1.0, 5.0)), clock=lambda: NOW)


def test_the_router_sends_a_first_failure_to_the_first_tier_with_its_clock() -> None:
    routed = ROUTER.handler_failure(decoded(event_record()), "points", failure(ValueError("x")))

    assert (routed.kind, routed.out.topic) == (Kind.RETRIED, f"{BASE}.retry.1s")
    assert dict(routed.out.headers)["retry-due-at"] == b"2001-02-03T04:05:07.000Z"
    assert (routed.row["status"], routed.row["attempts"]) == ("retrying", 1)


@pytest.mark.parametrize(
    ("attempt_header", "kind", "topic", "attempts"),
    [
        (b"1", Kind.RETRIED, f"{BASE}.retry.5s", 2),
        (b"2", Kind.DEAD_LETTERED, DLT, 3),
    ],
)
def test_the_router_counts_the_attempts_the_headers_report(
    attempt_header: bytes, kind: Kind, topic: str, attempts: int
) -> None:
    record = event_record(
        (
            ("dlt-original-topic", b"order-event-topic"),
            ("retry-consumer-group", b"points"),
            ("retry-attempt", attempt_header),
        )
    )

    routed = ROUTER.handler_failure(decoded(record), "points", failure(ValueError("x")))

    assert (routed.kind, routed.out.topic, routed.row["attempts"]) == (kind, topic, attempts)


def test_the_router_sends_a_non_retryable_failure_to_the_dlt_at_once() -> None:
    routed = ROUTER.handler_failure(decoded(event_record()), "points", failure(PermanentError("x")))

    assert (routed.kind, routed.out.topic, routed.detail) == (
        Kind.DEAD_LETTERED,
        DLT,
        "non-retryable",
    )
    assert (routed.row["status"], routed.row["reason"]) == ("dead", "non-retryable")


def test_the_router_sends_poison_to_the_dlt_once_for_nobody() -> None:
    poison = decode(RawRecord(BASE, 0, 8, b"k", b"not json"))
    assert isinstance(poison, Poison)

    routed = ROUTER.poison(poison)

    assert (routed.kind, routed.out.topic, routed.detail) == (Kind.POISON, DLT, "undecodable")
    assert (routed.row["consumer_group"], routed.row["status"]) == ("", "dead")
