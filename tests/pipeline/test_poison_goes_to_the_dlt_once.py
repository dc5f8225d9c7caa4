"""A record that cannot become an event goes to the DLT once and does not stop the batch.

Contract: bytes that are not JSON, JSON that is not an object, an envelope or
payload that fails its schema, and a known ``eventType`` at an
``eventVersion`` no model reads are poison: each yields one ``POISON``
outcome for consumer ``""``, exactly one record on the DLT (the original key,
value and headers; ``dlt-reason`` the reason of its ``PoisonError``, no
``dlt-consumer-group``: it is nobody's event) and exactly one ``failed_event``
row with ``consumer_group = ''``, status ``dead``, that reason and the record
exactly as it arrived, however many consumers there are. Its outcome, and so
``events_total``, names the ``eventType`` the JSON object names when it names one
(a string), whatever else failed; the label is that type if a schema knows it,
else ``other`` (``""`` only for poison that names none). The outcome, the row and the DLT
record's ``dlt-event-id`` name the ``eventId`` the object names even when its envelope
failed (a Java producer's version 0, say), where a column can hold it, so that ``trace``
and ``dlq list`` find it; so do its aggregate headers and columns: the aggregate the object
names, or the record key where the value holds no object (a tombstone, text that is no
JSON), as an event's would be (an operator's skip of one with an eventId then takes its
version). Redelivered (its
worker was killed before the offset was committed), it is neither recorded nor
dead-lettered again: its ``failed_event`` row, written in the transaction that put
its DLT record in the outbox, says that record is on its way, and the row is left
as it is. It goes through no retry tier. No handler sees it, and the good events
around it apply.
"""

from __future__ import annotations

import orjson
import pytest

from app import metrics
from app.context import HandlerContext
from app.metrics import REGISTRY
from app.pipeline.outcomes import Kind
from app.records import headers_from_json
from app.registry import Registry, handler
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import (
    Db,
    MakeProcessor,
    Outbox,
    header_map,
    kinds,
    write_effect,
)

DLT = dlt_topic(TOPIC)


def _without(field: str) -> bytes:
    env = envelope("bad")
    del env[field]
    return orjson.dumps(env)


POISON = [
    pytest.param(b"{not json", "undecodable", None, id="not-json"),
    pytest.param(b"", "undecodable", None, id="empty"),
    pytest.param(None, "undecodable", None, id="tombstone"),
    pytest.param(b"[1, 2, 3]", "undecodable", None, id="json-array"),
    pytest.param(b'"just a string"', "undecodable", None, id="json-string"),
    pytest.param(_without("eventId"), "invalid-schema", None, id="no-event-id"),
    pytest.param(_without("occurredAt"), "invalid-schema", "bad", id="no-occurred-at"),
    pytest.param(
        orjson.dumps(envelope("bad", aggregateVersion=0)),
        "invalid-schema",
        "bad",
        id="version-zero",
    ),
    pytest.param(
        orjson.dumps(envelope("b" * 129, aggregateVersion=0)),
        "invalid-schema",
        None,
        id="event-id-longer-than-its-column",
    ),
    pytest.param(
        orjson.dumps(envelope("bad\u0000id", aggregateVersion=0)),
        "invalid-schema",
        None,
        id="event-id-with-a-control-character",
    ),
    pytest.param(
        orjson.dumps(envelope("bad", data={"orderId": "o-1", "userId": "u-1", "amount": "-5"})),
        "invalid-schema",
        "bad",
        id="payload-fails-its-model",
    ),
    pytest.param(
        orjson.dumps(envelope("bad", event_version=2)),
        "unsupported-version",
        "bad",
        id="unsupported-event-version",
    ),
]


# The parameters whose value names no aggregate (no JSON object): the record key does.
NAMED_BY_THE_KEY = {"not-json", "empty", "tombstone", "json-array", "json-string"}


def register_two_consumers(registry: Registry, calls: list[tuple[str, str]]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        await write_effect(event, ctx)

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        await write_effect(event, ctx)


@pytest.mark.parametrize(("value", "reason", "event_id"), POISON)
async def test_poison_goes_to_the_dlt_once_for_nobody_and_the_good_events_apply(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    value: bytes | None,
    reason: str,
    event_id: str | None,
    request: pytest.FixtureRequest,
) -> None:
    calls: list[tuple[str, str]] = []
    register_two_consumers(registry, calls)
    before = records.event("e1", version=1)
    poison = records.raw(value, key=b"poison-key")
    after = records.event("e2", version=2)

    outcomes = await make_processor().process([before, poison, after])

    poison_outcomes = [o for o in outcomes if o.kind is Kind.POISON]
    assert [(o.consumer, o.event_id) for o in poison_outcomes] == [("", event_id)]
    assert sorted(calls) == [
        ("notification", "e1"),
        ("notification", "e2"),
        ("points", "e1"),
        ("points", "e2"),
    ]
    for consumer in ("notification", "points"):
        assert kinds(outcomes, consumer) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
        assert await db.version(consumer) == 2
        assert await db.failed(consumer) == []
    [dead] = await outbox.records()
    assert dead.topic == DLT
    assert (dead.key, dead.value, dead.headers[: len(poison.headers)]) == (
        b"poison-key",
        value,
        poison.headers,
    )
    headers = header_map(dead)
    assert headers["dlt-reason"] == reason
    assert "dlt-consumer-group" not in headers
    assert headers["dlt-attempts"] == "1"
    assert (headers["dlt-original-topic"], headers["dlt-original-offset"]) == (
        TOPIC,
        str(poison.offset),
    )
    assert headers["dlt-exception-type"].startswith("app.errors.")
    assert headers.get("dlt-event-id") == event_id
    by_key = request.node.callspec.id in NAMED_BY_THE_KEY
    aggregate_id = "poison-key" if by_key else envelope("bad")["aggregateId"]
    assert headers.get("dlt-aggregate-id") == aggregate_id
    [row] = await db.failed()
    assert row["consumer_group"] == ""
    assert row["reason"] == reason
    assert (row["status"], row["attempts"]) == ("dead", 1)
    assert row["event_id"] == event_id
    assert row["aggregate_id"] == aggregate_id
    assert row["offset"] == poison.offset
    assert row["record_value"] == value
    assert row["record_key"] == b"poison-key"
    assert headers_from_json(row["record_headers"]) == poison.headers


async def test_poison_counts_under_the_event_type_it_names(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    register_two_consumers(registry, [])
    mystery = envelope("m", event_type="SomethingNobodyKnows")
    del mystery["occurredAt"]
    batch = [
        records.raw(_without("occurredAt")),  # a known type, its envelope fails
        records.raw(orjson.dumps(envelope("v", event_version=2))),  # no model for the version
        records.raw(orjson.dumps(mystery)),
        records.raw(orjson.dumps(envelope("n", event_type=42))),  # no type: not a string
        records.raw(b"{not json"),
    ]

    def counted(event_type: str) -> float:
        labels = {"consumer": "", "outcome": "poison", "event_type": event_type}
        return REGISTRY.get_sample_value("effectively_once_events_total", labels) or 0.0

    before = {label: counted(label) for label in ("OrderPaid", "other", "")}
    outcomes = await make_processor().process(batch)
    metrics.record_outcomes(outcomes, batch_seconds=0.1, batch_size=len(batch))

    assert [o.event_type for o in outcomes if o.kind is Kind.POISON] == [
        "OrderPaid",
        "OrderPaid",
        "SomethingNobodyKnows",
        None,
        None,
    ]
    assert {label: counted(label) - before[label] for label in before} == {
        "OrderPaid": 2,
        "other": 1,
        "": 2,
    }


async def test_redelivered_poison_is_dead_lettered_once(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    register_two_consumers(registry, [])
    batch = [records.raw(b"\xff\xfe garbage"), records.event("e1")]
    await make_processor().process(batch)
    [first] = await outbox.records()
    [row] = await db.failed()

    outcomes = await make_processor().process(batch)

    assert [o.kind for o in outcomes] == [Kind.POISON, Kind.DUPLICATE, Kind.DUPLICATE]
    assert await db.failed() == [row]  # one row, as it was
    assert await outbox.records() == [first]  # one DLT record, not one per delivery
    assert first.topic == DLT


async def test_only_the_poison_not_recorded_before_is_dead_lettered(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    register_two_consumers(registry, [])
    old = records.raw(b"old garbage")
    await make_processor().process([old])
    new = records.raw(b"new garbage")

    await make_processor().process([old, new])

    dead = await outbox.records()
    assert [r.value for r in dead] == [b"old garbage", b"new garbage"]
    assert [r["offset"] for r in await db.failed()] == [old.offset, new.offset]


async def test_a_batch_of_nothing_but_poison_runs_no_consumer(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    calls: list[tuple[str, str]] = []
    register_two_consumers(registry, calls)
    batch = [records.raw(b"nope"), records.raw(orjson.dumps(envelope("x", event_version=9)))]

    outcomes = await make_processor().process(batch)

    assert [(o.kind, o.consumer) for o in outcomes] == [(Kind.POISON, ""), (Kind.POISON, "")]
    assert calls == []
    assert [r["reason"] for r in await db.failed()] == ["undecodable", "unsupported-version"]
    assert [header_map(r)["dlt-reason"] for r in await outbox.records()] == [
        "undecodable",
        "unsupported-version",
    ]


async def test_a_poison_record_with_an_event_id_is_not_a_dedup_record(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[tuple[str, str]] = []
    register_two_consumers(registry, calls)
    await make_processor().process([records.raw(orjson.dumps(envelope("e1", event_version=2)))])

    # The producer fixes the event and sends it again under the same eventId.
    outcomes = await make_processor().process([records.event("e1")])

    assert [o.kind for o in outcomes] == [Kind.APPLIED, Kind.APPLIED]
    assert sorted(calls) == [("notification", "e1"), ("points", "e1")]


async def test_poison_of_a_partition_reaches_the_dlt_in_the_order_it_came(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    outbox: Outbox,
) -> None:
    register_two_consumers(registry, [])
    # A schema violation is found after bytes that are no JSON at all; it came first.
    batch = [records.raw(_without("eventId")), records.raw(b"{not json"), records.raw(b"")]

    await make_processor().process(batch)

    assert [int(header_map(r)["dlt-original-offset"]) for r in await outbox.records()] == [
        r.offset for r in batch
    ]
