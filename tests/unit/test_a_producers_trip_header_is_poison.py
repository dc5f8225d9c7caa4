"""A producer's record carrying the trip's headers without where it came from is poison.

Contract: the framework writes ``retry-consumer-group``, ``retry-action``,
``retry-attempt``, ``retry-first-failure-at``, ``retry-due-at``,
``dlt-original-partition``, ``-offset``, ``-timestamp``, ``dlt-replay-count`` and
``dlt-app-id`` only on its retry and replay records, and always with
``dlt-original-topic``. On a producer's record (none of it there) such a header would
aim the event at one consumer (the others never see it: their effects lost), make a
consumer skip it, or count attempts never made; the record is poison instead, its
message naming the header. ``retry-action`` holds only ``skip``. With
``dlt-original-topic``, as the framework writes them, they are read as before. The one
exception is what ``dlq release`` published before its records said where they go (an
upgrade may find some unread): ``retry-consumer-group`` and ``retry-action: skip`` alone
on a ``VersionGivenUp`` envelope whose eventId is the one derived for that consumer,
aggregate and version; it is taken as the release it is.
"""

from __future__ import annotations

import orjson
import pytest

from app.errors import InvalidHeaderError
from app.pipeline.decode import Decoded, Poison, decode
from app.records import RawRecord
from dlq import headers as h
from dlq.given_up import GIVEN_UP, given_up_id
from dlq.trip import Trip
from tests.pipeline.events import envelope

VALUE = orjson.dumps(envelope("e-1", version=1))


def record(*headers: tuple[str, bytes]) -> RawRecord:
    return RawRecord("orders", 2, 40, b"o-1", VALUE, headers)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (h.RETRY_CONSUMER_GROUP, b"points-service"),
        (h.RETRY_ACTION, b"skip"),
        (h.RETRY_ATTEMPT, b"7"),
        (h.RETRY_DUE_AT, b"2026-12-07T10:00:00Z"),
        (h.RETRY_FIRST_FAILURE_AT, b"2026-12-07T10:00:00Z"),
        (h.DLT_ORIGINAL_OFFSET, b"3"),
        (h.DLT_REPLAY_COUNT, b"1"),
        (h.DLT_APP_ID, b"billing"),
    ],
)
def test_a_trip_header_without_its_origin_is_poison_naming_it(name: str, value: bytes) -> None:
    with pytest.raises(InvalidHeaderError, match=f"header {name} is .* without dlt-original-topic"):
        Trip.of(record((name, value)))
    found = decode(record((name, value)))
    assert isinstance(found, Poison)
    assert name in str(found.error)


def test_retry_action_holds_only_skip() -> None:
    aimed = ((h.DLT_ORIGINAL_TOPIC, b"orders"), (h.RETRY_CONSUMER_GROUP, b"points-service"))
    with pytest.raises(InvalidHeaderError, match="header retry-action is 'retry', not 'skip'"):
        Trip.of(record(*aimed, (h.RETRY_ACTION, b"retry")))


def test_with_its_origin_a_record_is_aimed_at_its_consumer_as_the_framework_writes_it() -> None:
    aimed = (
        (h.DLT_ORIGINAL_TOPIC, b"orders"),
        (h.RETRY_CONSUMER_GROUP, b"points-service"),
        (h.RETRY_ACTION, b"skip"),
    )
    found = decode(record(*aimed))
    assert isinstance(found, Decoded)
    assert (found.trip.consumer, found.trip.skip) == ("points-service", True)
    # A producer's own headers, whatever they say, are not the framework's.
    plain = decode(record(("x-retry-consumer-group", b"points-service"), ("id", b"e-1")))
    assert isinstance(plain, Decoded)
    assert (plain.trip.consumer, plain.trip.skip) == (None, False)


def released_before(consumer: str, event_id: str) -> RawRecord:
    """A skip record as ``dlq release`` published it before it wrote where it goes."""
    value = {
        "eventId": event_id,
        "eventType": GIVEN_UP,
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-1",
        "aggregateVersion": 2,
        "occurredAt": "2026-12-06T12:00:00+00:00",
        "data": {},
    }
    headers = ((h.RETRY_CONSUMER_GROUP, consumer.encode()), (h.RETRY_ACTION, b"skip"))
    return RawRecord("orders", 2, 41, b"o-1", orjson.dumps(value), headers)


def test_an_earlier_releases_skip_record_is_taken_as_released() -> None:
    derived = given_up_id("points-service", "Order", "o-1", 2)

    found = decode(released_before("points-service", derived))

    assert isinstance(found, Decoded), found
    assert (found.trip.consumer, found.trip.skip) == ("points-service", True)
    assert (found.event.aggregate_id, found.event.aggregate_version) == ("o-1", 2)
    # Not derived for the consumer it names, or not derived at all: a producer's headers.
    for consumer, event_id in (("inventory-service", derived), ("points-service", "e-7")):
        refused = decode(released_before(consumer, event_id))
        assert isinstance(refused, Poison), refused
        assert "without dlt-original-topic" in str(refused.error)
