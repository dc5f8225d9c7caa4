"""A producer's mistake reaches the DLT with a reason a person can act on; the worker goes on.

Contract, with the real broker and a worker on PostgreSQL: an event whose
aggregate is nowhere (not in the value, no key), an id written as a float, a
Debezium-wrapped value whose inner JSON is broken, the router's ``Struct{...}``
text, a version the tables cannot store and a framework header a producer set
(``retry-attempt: soon``, ``retry-consumer-group`` on a record that is no retry) each
land on the DLT once, its bytes, key and headers as sent, with the ``dlt-reason`` and a
``dlt-exception-message`` that names what is wrong; the good events around them apply.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.demo.envelopes import Message
from dlq.records import original_headers
from tests.integration.support.dlq import dead_letters
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

WRAPPED = b'{"schema":{"type":"string","optional":false},"payload":'


def paid(event_id: int, **changes: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "eventId": event_id,
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "occurredAt": "2026-07-16T10:31:00Z",
        "data": {
            "orderId": 100001,
            "userId": 20001,
            "amount": "10.50",
            "paidAt": "2026-07-16T10:31:00Z",
        },
    }
    env.update(changes)
    return env


MISTAKES = [
    (
        Message(None, orjson.dumps(paid(2))),
        "invalid-schema",
        "aggregateId: Field required (not in the value, and the record has no key)",
    ),
    (
        Message(b"100001", orjson.dumps(paid(3, eventId=3.0))),
        "invalid-schema",
        "eventId: an id is a JSON string or a JSON integer, not 3.0",
    ),
    (
        Message(b"100001", WRAPPED + orjson.dumps('{"eventId": 4, "eventType": ') + b"}"),
        "undecodable",
        "whose text is not JSON",
    ),
    (
        Message(b"100001", b"Struct{eventId=5,eventType=OrderPaid}"),
        "undecodable",
        "table.expand.json.payload=false",
    ),
    (
        Message(b"100001", orjson.dumps(paid(6, aggregateVersion=2**31))),
        "invalid-schema",
        "aggregateVersion: Input should be less than or equal to 2147483647",
    ),
    (
        Message(b"100001", orjson.dumps(paid(7)), (("retry-attempt", b"soon"),)),
        "invalid-header",
        "header retry-attempt is 'soon' without dlt-original-topic",
    ),
    (
        # Aimed at one consumer as only the framework's retry records are: the others would
        # never see it, points-service alone would apply it.
        Message(b"100001", orjson.dumps(paid(9)), (("retry-consumer-group", b"points-service"),)),
        "invalid-header",
        "header retry-consumer-group is 'points-service' without dlt-original-topic",
    ),
]


async def test_each_mistake_is_dead_lettered_with_its_reason_and_the_rest_applies(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    worker = workers.start(database_url)
    other_order = {**paid(8)["data"], "orderId": 100002}
    good = [
        Message(b"100001", orjson.dumps(paid(1))),
        Message(b"100002", orjson.dumps(paid(8, data=other_order))),
    ]

    await topic.send([good[0], *(m for m, _, _ in MISTAKES), good[1]])
    await topic.drained(workers=[worker])
    dead = await dead_letters(topic.stream, len(MISTAKES), [worker])

    assert worker.alive
    assert await db.balances() == {"20001": 20}  # two orders of 10.50, each floored
    assert len(dead) == len(MISTAKES)
    by_value = {record.value: record for record in dead}
    for message, reason, says in MISTAKES:
        record = by_value[message.value]
        headers = {name: value.decode() for name, value in record.headers}
        assert (headers["dlt-reason"], record.key) == (reason, message.key)
        assert says in headers["dlt-exception-message"], headers["dlt-exception-message"]
        assert tuple(original_headers(record)) == tuple(
            h for h in message.headers if h[0] not in ("retry-attempt", "retry-consumer-group")
        )
