"""Rows a producer outside Python inserts with plain SQL ship as they were written.

Contract: an order service in Java, Go or SQL inserts ``event_id``, ``aggregate_type``,
``aggregate_id``, ``event_type``, ``topic`` and ``payload`` (with ``status``,
``created_at`` and ``updated_at``, or leaving them to the server's defaults), and
the relay publishes each row: value = the payload's bytes exactly, key = the
aggregate id (or ``event_key``), headers = the ``headers`` column plus ``id`` =
the event id, ``eventType`` and ``aggregateType`` = the row's (as the shipped Debezium
connector places them), so a payload may leave those fields to its columns: the
consumers read them from the headers (and the aggregate id from the key). Ids
differing only in case are different ids (``EVT-1`` and ``evt-1`` are two events,
``ORDER-A`` and ``order-a`` two aggregates). On each database.
"""

from __future__ import annotations

import orjson
import pytest
from sqlalchemy import text

from app.db.engine import create_engine
from app.pipeline.decode import Decoded, decode
from tests.integration.support.databases import BACKENDS
from tests.integration.support.dlq import records
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import relay_on, rows, until_idle

pytestmark = pytest.mark.integration

FULL = (
    "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, topic, "
    "payload, headers, status, created_at, updated_at) VALUES (:event_id, 'Order', "
    ":aggregate_id, 'OrderPaid', :topic, :payload, :headers, 'PENDING', CURRENT_TIMESTAMP, "
    "CURRENT_TIMESTAMP)"
)
MINIMAL = (
    "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, topic, "
    "payload, event_key) VALUES (:event_id, 'Order', :aggregate_id, 'OrderPaid', :topic, "
    ":payload, :event_key)"
)


def payload(event_id: str, aggregate_id: str) -> str:
    # As a Java service would write it: spaces, a number as the amount, fields in its order.
    return (
        f'{{"eventId": "{event_id}", "eventType": "OrderPaid", "eventVersion": 1, '
        f'"aggregateType": "Order", "aggregateId": "{aggregate_id}", '
        f'"occurredAt": "2026-12-03T10:00:00Z", "data": {{"orderId": "{aggregate_id}", '
        f'"userId": "u-1", "amount": 12.5, "paidAt": "2026-12-03T10:00:00Z"}}}}'
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_rows_inserted_with_plain_sql_ship_as_written(
    topic: OrderTopic, migrated_database: str
) -> None:
    stream = topic.stream
    written = [
        ("EVT-1", "ORDER-A", FULL, {"headers": '{"traceparent": "00-abc-01"}'}),
        ("evt-1", "order-a", FULL, {"headers": None}),
        ("EVT-2", "ORDER-A", MINIMAL, {"event_key": "customer-7"}),
    ]
    engine = create_engine(migrated_database, pool_size=1)
    try:
        async with engine.begin() as conn:
            for event_id, aggregate_id, statement, extra in written:
                await conn.execute(
                    text(statement),
                    {
                        "event_id": event_id,
                        "aggregate_id": aggregate_id,
                        "topic": stream.topic,
                        "payload": payload(event_id, aggregate_id),
                        **extra,
                    },
                )
    finally:
        await engine.dispose()
    defaults = await rows(migrated_database, "status", "retry_count", "created_at", "updated_at")
    assert [(r["status"], r["retry_count"]) for r in defaults] == [("PENDING", 0)] * 3
    assert all(r["created_at"] is not None and r["updated_at"] is not None for r in defaults)

    async with relay_on(migrated_database, stream.broker_url) as relay:
        await until_idle(relay)

    assert {r["status"] for r in await rows(migrated_database, "status")} == {"PUBLISHED"}
    sent = {orjson.loads(r.value or b"")["eventId"]: r for r in await records(stream, stream.topic)}
    assert set(sent) == {"EVT-1", "evt-1", "EVT-2"}
    for event_id, aggregate_id, _, extra in written:
        record = sent[event_id]
        assert record.value == payload(event_id, aggregate_id).encode()
        assert record.key == (extra.get("event_key") or aggregate_id).encode()
        assert record.header("id") == event_id.encode()
    assert sent["EVT-1"].header("traceparent") == b"00-abc-01"
    assert sent["EVT-1"].headers == (
        ("traceparent", b"00-abc-01"),
        ("id", b"EVT-1"),
        ("eventType", b"OrderPaid"),
        ("aggregateType", b"Order"),
    )


LEAN = (
    '{"eventVersion": 1, "occurredAt": "2026-12-03T10:00:00Z", "data": {"orderId": "o-9", '
    '"userId": "u-1", "amount": 3, "paidAt": "2026-12-03T10:00:00Z"}}'
)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_payload_may_leave_its_ids_and_types_to_the_rows_columns(
    topic: OrderTopic, migrated_database: str
) -> None:
    stream = topic.stream
    engine = create_engine(migrated_database, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(MINIMAL),
                {
                    "event_id": "lean-1",
                    "aggregate_id": "o-9",
                    "topic": stream.topic,
                    "payload": LEAN,
                    "event_key": None,
                },
            )
    finally:
        await engine.dispose()

    async with relay_on(migrated_database, stream.broker_url) as relay:
        await until_idle(relay)

    [record] = await records(stream, stream.topic)
    assert record.value == LEAN.encode()
    found = decode(record, default_aggregate_type="ORDER")
    assert isinstance(found, Decoded), found
    event = found.event
    # The column's 'Order', not the consumers' default: the aggregate is the one the
    # same service's payloads that name it order under.
    assert (event.event_id, event.event_type, event.aggregate_type, event.aggregate_id) == (
        "lean-1",
        "OrderPaid",
        "Order",
        "o-9",
    )
