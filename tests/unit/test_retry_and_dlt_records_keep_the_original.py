"""Retry and DLT records carry the original record unchanged, plus one set of our headers.

Contract: a record sent to a retry tier or the DLT has the original key, value
and headers (in their order, repeated names included, and a producer's own
header kept even when its name merely starts like ours, e.g. ``retry-after``);
failure metadata is only added as headers. A DLT record of a handler failure carries exactly the
headers the failures issue names (with ``FAILURE_DETAIL=full``; what the other modes leave
out, ``test_failure_detail_decides_what_of_an_exception_travels``): ``dlt-original-topic``,
``-partition``, ``-offset``, ``-timestamp``, ``dlt-consumer-group``, ``dlt-reason``,
``dlt-exception-type`` (the qualified class name), ``dlt-exception-message``
(cut at ``MESSAGE_LIMIT``), ``dlt-exception-stacktrace`` (its last
``STACKTRACE_LIMIT`` characters), ``dlt-attempts``, ``dlt-first-failure-at``,
``dlt-last-failure-at`` (ISO-8601 in UTC), ``dlt-event-id``, ``dlt-event-type``,
``dlt-aggregate-type``, ``dlt-aggregate-id``, ``dlt-aggregate-version``; a DLT
record of poison carries no ``dlt-consumer-group`` (nor event headers when no
event could be read). A retry record names its consumer, attempt, first
failure and due time besides the original coordinates. However many trips a
record makes (main → tier 1 → tier 2 → DLT → replayed → tier 1) it carries one
value of each header, and ``Trip.of`` reads back the ORIGINAL topic, partition,
offset and timestamp.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from app.failure_detail import FailureDetail, FailureDetailPolicy
from app.pipeline.apply import HandlerFailed
from app.pipeline.decode import Decoded, decode
from app.pipeline.route import FailureRouter
from app.records import RawRecord
from app.registry import HandlerSpec
from dlq import headers as h
from dlq.policy import DeadReason, RetryPolicy, route
from dlq.records import Failure, OutRecord, dead_letter_record, replay_record, retry_record
from dlq.trip import Trip

BASE = "order-event-topic"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
ORIGINAL_HEADERS = (
    ("traceparent", b"00-abc-01"),
    ("bin", b"\x00\xff"),
    ("tag", b"first"),
    ("tag", b"second"),
)
ORIGINAL_TIMESTAMP_MS = 1_714_564_800_000
FULL = FailureDetailPolicy(FailureDetail.FULL)

DLT_HEADERS_OF_A_HANDLER_FAILURE = {
    "dlt-original-topic",
    "dlt-original-partition",
    "dlt-original-offset",
    "dlt-original-timestamp",
    "dlt-consumer-group",
    "dlt-reason",
    "dlt-exception-type",
    "dlt-exception-message",
    "dlt-exception-stacktrace",
    "dlt-attempts",
    "dlt-first-failure-at",
    "dlt-last-failure-at",
    "dlt-event-id",
    "dlt-event-type",
    "dlt-aggregate-type",
    "dlt-aggregate-id",
    "dlt-aggregate-version",
}
RETRY_HEADERS = {
    "retry-consumer-group",
    "retry-attempt",
    "retry-first-failure-at",
    "retry-due-at",
    "dlt-original-topic",
    "dlt-original-partition",
    "dlt-original-offset",
    "dlt-original-timestamp",
}


class SkuMissing(Exception):
    """A handler's own exception type, to check the qualified name."""


def original(value: bytes | None = None) -> RawRecord:
    if value is None:
        value = orjson.dumps(
            {
                "eventId": "e-7",
                "eventType": "OrderPaid",
                "eventVersion": 1,
                "aggregateType": "Order",
                "aggregateId": "o-9",
                "aggregateVersion": 3,
                "occurredAt": "2024-05-01T12:00:00Z",
                "data": {
                    "orderId": "o-9",
                    "userId": "u-1",
                    "amount": "1.00",
                    "paidAt": "2024-05-01T12:00:00Z",
                },
            }
        )
    return RawRecord(BASE, 3, 41, b"o-9", value, ORIGINAL_HEADERS, ORIGINAL_TIMESTAMP_MS)


def raised(exc: BaseException) -> BaseException:
    """``exc`` with a traceback, as a handler's failure has one."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def event_of(record: RawRecord) -> Any:
    item = decode(record)
    assert isinstance(item, Decoded)
    return item.event


def names(out: OutRecord) -> list[str]:
    return [name for name, _ in out.headers]


def ours(out: OutRecord) -> dict[str, str]:
    return {name: value.decode() for name, value in out.headers if h.is_ours(name)}


def theirs(out: OutRecord) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, value) for name, value in out.headers if not h.is_ours(name))


def dead_letter(
    record: RawRecord, consumer: str | None, exc: BaseException, at: datetime = NOW
) -> OutRecord:
    event = event_of(record) if consumer else None
    failure = Failure(consumer, FULL.describe(exc), at, event)
    return dead_letter_record(
        record, Trip.of(record), failure, DeadReason.NON_RETRYABLE, 1, f"{BASE}.DLT"
    )


def test_a_retry_record_keeps_the_original_and_adds_its_headers() -> None:
    record = original()
    failure = Failure("points", FULL.describe(SkuMissing("sku-1")), NOW, event_of(record))
    next_stop = route(RetryPolicy(BASE, (1.0, 5.0)), 1, True, NOW)

    out = retry_record(record, Trip.of(record), failure, next_stop)

    assert (out.topic, out.key, out.value) == (f"{BASE}.retry.1s", record.key, record.value)
    assert out.headers[: len(ORIGINAL_HEADERS)] == ORIGINAL_HEADERS
    assert theirs(out) == ORIGINAL_HEADERS
    assert set(ours(out)) == RETRY_HEADERS
    assert ours(out) == {
        "retry-consumer-group": "points",
        "retry-attempt": "1",
        "retry-first-failure-at": "2024-05-01T12:00:00.000Z",
        "retry-due-at": "2024-05-01T12:00:01.000Z",
        "dlt-original-topic": BASE,
        "dlt-original-partition": "3",
        "dlt-original-offset": "41",
        "dlt-original-timestamp": str(ORIGINAL_TIMESTAMP_MS),
    }


def test_a_dlt_record_of_a_handler_failure_carries_exactly_the_issues_headers() -> None:
    record = original()

    out = dead_letter(record, "points", raised(SkuMissing("sku-1 is gone")))

    assert (out.topic, out.key, out.value) == (f"{BASE}.DLT", record.key, record.value)
    assert theirs(out) == ORIGINAL_HEADERS
    assert set(ours(out)) == DLT_HEADERS_OF_A_HANDLER_FAILURE
    headers = ours(out)
    assert {k: v for k, v in headers.items() if k != "dlt-exception-stacktrace"} == {
        "dlt-original-topic": BASE,
        "dlt-original-partition": "3",
        "dlt-original-offset": "41",
        "dlt-original-timestamp": str(ORIGINAL_TIMESTAMP_MS),
        "dlt-consumer-group": "points",
        "dlt-reason": "non-retryable",
        "dlt-exception-type": f"{__name__}.SkuMissing",
        "dlt-exception-message": "sku-1 is gone",
        "dlt-attempts": "1",
        "dlt-first-failure-at": "2024-05-01T12:00:00.000Z",
        "dlt-last-failure-at": "2024-05-01T12:00:00.000Z",
        "dlt-event-id": "e-7",
        "dlt-event-type": "OrderPaid",
        "dlt-aggregate-type": "Order",
        "dlt-aggregate-id": "o-9",
        "dlt-aggregate-version": "3",
    }
    trace = headers["dlt-exception-stacktrace"]
    assert trace.startswith("Traceback (most recent call last):")
    assert trace.rstrip().endswith("SkuMissing: sku-1 is gone")


def test_a_producers_own_header_that_shares_our_prefix_is_kept() -> None:
    # Only the names in ``dlq.headers`` are ours; a producer may well send "retry-after".
    theirs_too = (*ORIGINAL_HEADERS, ("retry-after", b"30"), ("dlt-owner", b"team-orders"))
    record = RawRecord(BASE, 3, 41, b"o-9", original().value, theirs_too, ORIGINAL_TIMESTAMP_MS)
    failure = Failure("points", FULL.describe(SkuMissing("x")), NOW, event_of(record))
    next_stop = route(RetryPolicy(BASE, (1.0,)), 1, True, NOW)

    retry = retry_record(record, Trip.of(record), failure, next_stop)
    dead = dead_letter(record, "points", raised(SkuMissing("x")))

    for out in (retry, dead):
        assert out.headers[: len(theirs_too)] == theirs_too


def test_a_dlt_record_of_poison_names_no_consumer_and_no_event() -> None:
    record = original(b"not json")

    out = dead_letter(record, None, raised(ValueError("value is not JSON")))

    assert (out.key, out.value) == (record.key, record.value)
    assert theirs(out) == ORIGINAL_HEADERS
    assert set(ours(out)) == DLT_HEADERS_OF_A_HANDLER_FAILURE - {
        "dlt-consumer-group",
        "dlt-event-id",
        "dlt-event-type",
        "dlt-aggregate-type",
        "dlt-aggregate-id",
        "dlt-aggregate-version",
    }


def test_a_huge_exception_message_is_cut() -> None:
    out = dead_letter(original(), "points", raised(ValueError("x" * 10_000)))

    assert ours(out)["dlt-exception-message"] == "x" * h.MESSAGE_LIMIT


def deep(n: int) -> None:
    # Two functions in turn, so Python cannot fold the frames into "repeated N times".
    if n == 0:
        raise SkuMissing("at the bottom")
    deeper(n - 1)


def deeper(n: int) -> None:
    deep(n)


def test_a_huge_stacktrace_keeps_its_last_part_within_the_limit() -> None:
    try:
        deep(200)
    except SkuMissing as exc:
        out = dead_letter(original(), "points", exc)

    trace = ours(out)["dlt-exception-stacktrace"]
    assert len(trace) <= h.STACKTRACE_LIMIT + len("...\n")
    assert trace.startswith("...\n")
    assert trace.rstrip().endswith("SkuMissing: at the bottom")


@pytest.mark.parametrize(
    "at",
    [
        datetime(2024, 5, 1, 14, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=2))),
        datetime(2024, 5, 1, 12, 0, 0, 250_000, tzinfo=UTC),
    ],
)
def test_failure_times_are_iso_8601_in_utc(at: datetime) -> None:
    out = dead_letter(original(), "points", raised(ValueError("x")), at=at)

    for name in ("dlt-first-failure-at", "dlt-last-failure-at"):
        text = ours(out)[name]
        assert text == "2024-05-01T12:00:00.250Z"
        assert datetime.fromisoformat(text) == at


# Many trips: the router as the pipeline uses it, each hop delivered back like the broker does.


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def failed(cause: BaseException) -> HandlerFailed:
    async def fn(event: Any, ctx: Any) -> None:  # pragma: no cover - never called
        pass

    return HandlerFailed(HandlerSpec("OrderPaid", "points", fn), cause)


def delivered(out: OutRecord, offset: int, extra: tuple[tuple[str, bytes], ...] = ()) -> RawRecord:
    """``out`` read back from its topic: its own partition, offset and broker timestamp."""
    return RawRecord(
        out.topic, 0, offset, out.key, out.value, (*out.headers, *extra), 1_800 + offset
    )


def test_headers_never_pile_up_and_the_original_survives_every_trip() -> None:
    clock = Clock()
    router = FailureRouter(RetryPolicy(BASE, (1.0, 5.0)), clock=clock)
    main = original()
    hops: list[OutRecord] = []

    def fail(record: RawRecord) -> OutRecord:
        item = decode(record)
        assert isinstance(item, Decoded)
        out = router.handler_failure(item, "points", failed(raised(SkuMissing("sku-1")))).out
        hops.append(out)
        clock.now += timedelta(seconds=7)
        return out

    tier1 = fail(main)
    tier2 = fail(delivered(tier1, 100))
    dlt = fail(delivered(tier2, 200))
    # An operator replays the DLT record (to the original topic, for its consumer) ...
    replayed = replay_record(delivered(dlt, 300))
    hops.append(replayed)
    # ... and it fails again: into tier 1, as a first attempt.
    again = fail(delivered(replayed, 301))

    assert [out.topic for out in hops] == [
        f"{BASE}.retry.1s",
        f"{BASE}.retry.5s",
        f"{BASE}.DLT",
        BASE,
        f"{BASE}.retry.1s",
    ]
    for out in hops:
        repeated = {name for name, n in Counter(names(out)).items() if n > 1}
        assert repeated == {"tag"}  # the original's own repeated header, nothing of ours
        assert theirs(out) == ORIGINAL_HEADERS
        assert (out.key, out.value) == (main.key, main.value)
        trip = Trip.of(delivered(out, 999))
        assert (
            trip.original_topic,
            trip.original_partition,
            trip.original_offset,
            trip.original_timestamp_ms,
        ) == (BASE, 3, 41, ORIGINAL_TIMESTAMP_MS)
    assert ours(dlt)["dlt-attempts"] == "3"
    assert ours(dlt)["dlt-reason"] == "retries-exhausted"
    assert ours(dlt)["dlt-first-failure-at"] == "2024-05-01T12:00:00.000Z"
    assert ours(dlt)["dlt-last-failure-at"] == "2024-05-01T12:00:14.000Z"
    assert ours(replayed)["dlt-replay-count"] == "1"
    assert ours(replayed)["retry-consumer-group"] == "points"
    assert ours(again)["retry-attempt"] == "1"
    assert ours(again)["dlt-replay-count"] == "1"
    assert Trip.of(delivered(again, 400)).replay_count == 1
