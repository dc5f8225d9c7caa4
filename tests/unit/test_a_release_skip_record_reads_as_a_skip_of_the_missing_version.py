"""The record ``dlq release`` publishes for a missing version reads as that version's skip.

Contract: ``skip_record`` of a gap decodes, for every consumer reading the topic, as an
event of the gap's aggregate at the missing version, aimed at the gap's consumer only
and marked a skip (whatever the registry validates: its eventType has no model), with
the parked record's key and topic, its data naming who gave the version up and why;
its eventId is the same for the same consumer,
aggregate and version, and differs otherwise. The versions given up are those between
the last applied and the first parked.
"""

from __future__ import annotations

from datetime import UTC, datetime

from app.pipeline.decode import Decoded, decode
from app.records import RawRecord
from dlq.gaps import Gap, Release, skip_record

GAP = Gap("points-service", "Order", "order-17", 1, 4, 2, "orders", 3, b"order-17")
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def as_read(gap: Gap, version: int) -> Decoded:
    out = skip_record(gap, version, NOW, Release("ops-anna", "order deleted by hand"))
    found = decode(RawRecord(out.topic, gap.partition, 99, out.key, out.value, out.headers))
    assert isinstance(found, Decoded), found
    return found


def test_the_missing_versions_are_those_between_last_applied_and_first_parked() -> None:
    assert GAP.missing == [2, 3]
    assert Gap("c", "Order", "o", None, 3, 1, "orders", 0, None).missing == [1, 2]
    assert Gap("c", "Order", "o", 2, 3, 1, "orders", 0, None).missing == []


def test_a_skip_record_is_the_missing_version_of_the_aggregate_for_its_consumer() -> None:
    read = as_read(GAP, 2)
    assert read.event.aggregate == ("Order", "order-17")
    assert read.event.aggregate_version == 2
    assert read.trip.skip
    assert read.trip.consumer == "points-service"
    assert read.record.key == b"order-17"
    assert read.record.topic == "orders"


def test_its_event_id_is_the_same_for_the_same_version_only() -> None:
    first, again = as_read(GAP, 2).event.event_id, as_read(GAP, 2).event.event_id
    assert first == again
    assert as_read(GAP, 3).event.event_id != first
    other = Gap("inventory", "Order", "order-17", 1, 4, 2, "orders", 3, b"order-17")
    assert as_read(other, 2).event.event_id != first


def test_it_says_who_gave_the_version_up_and_why() -> None:
    data = as_read(GAP, 2).event.model_dump()["data"]
    assert data == {"givenUpBy": "ops-anna", "why": "order deleted by hand"}
    unexplained = skip_record(GAP, 2, NOW, Release("ops-anna"))
    assert b'"data":{"givenUpBy":"ops-anna"}' in unexplained.value
