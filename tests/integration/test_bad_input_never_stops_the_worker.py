"""Bad input never stops the worker.

Contract: a record that cannot become an event is recorded once in
``failed_event`` (consumer_group ``''``, its raw bytes kept, the reason
named) and the worker goes on: bytes that are not JSON (``undecodable``), an
envelope or payload that violates the schema (``invalid-schema``), and a
known eventType at an eventVersion no model reads (``unsupported-version``).
Good events before, between and after them, in the same partition, apply
exactly as if the bad records were not there.
"""

from __future__ import annotations

import orjson
import pytest

from app.demo.envelopes import encode
from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import CONSUMERS, Database, every_consumer
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("backend", BACKENDS)
async def test_poison_is_recorded_with_its_reason_and_good_events_still_apply(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    alice = Order("alice", 12_345, (("SKU-A", 2),))
    created, paid, cancelled = alice.created(), alice.paid(), alice.cancelled()
    # No aggregateVersion on the bad ones: the contract here is about decoding,
    # not about which version a poison record would have taken.
    no_envelope = {"eventType": "OrderPaid", "data": {"orderId": alice.order_id}}
    bad_payload = alice.event("OrderPaid", None, {"orderId": alice.order_id, "amount": "lots"})
    future_version = alice.event("OrderPaid", None, paid["data"], event_version=99)
    not_json = alice.raw(b"\xff\xfe this is not JSON {")
    records = [
        encode(created),
        not_json,
        alice.raw(orjson.dumps(no_envelope)),
        encode(paid),
        encode(bad_payload),
        encode(future_version),
        encode(cancelled),
        alice.raw(b"[1, 2, 3]"),
    ]
    worker = workers.start(database_url)
    await topic.send(records)
    await topic.drained(workers=[worker])

    assert worker.alive
    assert await db.balances() == {"alice": 0}
    assert await db.reserved() == {"SKU-A": 0}
    assert await db.notifications() == {alice.order_id: 3}
    assert await db.versions(alice.order_id) == every_consumer(3)
    good = sorted(e["eventId"] for e in (created, paid, cancelled))
    for consumer in CONSUMERS:
        assert await db.consumed_ids(consumer) == good, consumer

    failures = await db.failures()
    assert [
        (f["consumer_group"], f["reason"], f["event_id"], f["record_value"]) for f in failures
    ] == [
        ("", "undecodable", None, not_json.value),
        ("", "invalid-schema", None, orjson.dumps(no_envelope)),
        ("", "invalid-schema", bad_payload["eventId"], encode(bad_payload).value),
        ("", "unsupported-version", future_version["eventId"], encode(future_version).value),
        ("", "undecodable", None, b"[1, 2, 3]"),
    ]
    assert [f["offset"] for f in failures] == [1, 2, 4, 5, 7]
    assert all(f["exception_message"] for f in failures)
