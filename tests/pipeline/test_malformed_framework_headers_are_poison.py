"""A framework header a producer set to something the framework never writes is poison.

Contract: a record whose ``retry-*`` or ``dlt-*`` header cannot be read (a
non-numeric ``retry-attempt``, a time that is not ISO-8601, a partition beyond
what the tables store) goes to the DLT once as ``invalid-header``, with a
message naming the header and its value, and named by the eventId and aggregate its value
says (``trace``, ``dlq list`` and a skip for a consumer find it); the batch goes on, the good events
around it apply, and nothing raises (before, ``Trip.of`` raised and every
owner of the partition crashed on the record). Reading a due time for a
retry tier's wait never raises either.
"""

from __future__ import annotations

import orjson
import pytest

from app.context import HandlerContext
from app.errors import InvalidHeaderError
from app.pipeline.decode import Poison, decode
from app.pipeline.outcomes import Kind
from app.records import RawRecord
from app.registry import Registry, handler
from dlq.trip import Trip, due_at
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import Db, MakeProcessor, Outbox, header_map, write_effect

MALFORMED = [
    pytest.param(("retry-attempt", b"soon"), "retry-attempt", id="attempt-not-a-number"),
    pytest.param(("retry-due-at", b"tomorrow"), "retry-due-at", id="due-not-iso"),
    pytest.param(("retry-first-failure-at", b"2024-13-45"), "retry-first-failure-at", id="bad-day"),
    pytest.param(("dlt-replay-count", b"-1"), "dlt-replay-count", id="negative-count"),
    pytest.param(("dlt-original-timestamp", b"1.5e12"), "dlt-original-timestamp", id="float-ms"),
]


def with_header(records: Records, event_id: str, header: tuple[str, bytes]) -> RawRecord:
    source = records.event(event_id, version=2)
    return source._replace(headers=(*source.headers, header))


@pytest.mark.parametrize(("header", "name"), MALFORMED)
async def test_a_malformed_framework_header_is_dead_lettered_once_and_the_batch_goes_on(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    header: tuple[str, bytes],
    name: str,
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    before = records.event("e1", version=1, event_type="OrderCreated")
    bad = with_header(records, "e2", header)
    after = records.event("e3", version=None)

    outcomes = await make_processor().process([before, bad, after])

    # Named by what its value says all the same: trace, dlq list and a skip find it.
    assert [o.event_id for o in outcomes if o.kind is Kind.POISON] == ["e2"]
    assert await db.effects("points") == ["e3"]
    [dead] = await outbox.records()
    headers = header_map(dead)
    assert headers["dlt-reason"] == "invalid-header"
    assert (headers["dlt-event-id"], headers["dlt-aggregate-version"]) == ("e2", "2")
    assert name in headers["dlt-exception-message"]
    assert headers["dlt-original-offset"] == str(bad.offset)  # from where it is, not its header
    assert (dead.key, dead.value) == (bad.key, bad.value)
    [row] = await db.failed()
    assert (row["reason"], row["consumer_group"], row["offset"]) == ("invalid-header", "", 1)


@pytest.mark.parametrize(("header", "name"), MALFORMED)
def test_the_poison_says_which_header_holds_what(header: tuple[str, bytes], name: str) -> None:
    source = RawRecord(TOPIC, 0, 9, b"o-1", orjson.dumps(envelope("e1")), (header,))

    with pytest.raises(InvalidHeaderError, match=f"header {name} is '"):
        Trip.of(source)
    found = decode(source)
    assert isinstance(found, Poison)
    assert isinstance(found.error, InvalidHeaderError)
    assert found.trip == Trip.fresh(source)
    assert due_at(source) is None


def test_a_partition_beyond_what_the_tables_store_is_malformed() -> None:
    source = RawRecord(
        TOPIC,
        0,
        9,
        b"o-1",
        b"{}",
        (("dlt-original-topic", b"orders"), ("dlt-original-partition", b"2147483648")),
    )

    with pytest.raises(InvalidHeaderError, match="an integer from 0 to 2147483647"):
        Trip.of(source)


def test_well_formed_headers_still_read_as_before() -> None:
    source = RawRecord(
        "orders.retry.5s",
        3,
        40,
        b"o-1",
        b"{}",
        (
            ("retry-consumer-group", b"points"),
            ("retry-attempt", b"2"),
            ("retry-due-at", b"2024-05-01T12:00:05.000Z"),
            ("dlt-original-topic", b"orders"),
            ("dlt-original-partition", b"1"),
            ("dlt-original-offset", b"17"),
        ),
    )

    trip = Trip.of(source)

    assert (trip.consumer, trip.attempts, trip.original_topic) == ("points", 2, "orders")
    assert (trip.original_partition, trip.original_offset) == (1, 17)
    assert due_at(source) == trip.due_at is not None
