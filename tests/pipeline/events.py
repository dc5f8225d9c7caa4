"""Build order events and records by hand, the way producers put them on the wire.

Every builder is deterministic: fixed ids, a fixed ``occurredAt``, and payloads
that satisfy the shipped ``schemas.order`` models.
"""

from __future__ import annotations

from typing import Any

import orjson

from app.outbox.message import Message
from app.records import RawRecord
from app.testing import Records as PublicRecords
from dlq.records import OutRecord

TOPIC = "order-event-topic"
OCCURRED_AT = "2024-05-01T12:00:00Z"

_DATA: dict[str, dict[str, Any]] = {
    "OrderCreated": {
        "orderNo": "N-1",
        "userId": "u-1",
        "amount": "10.00",
        "items": [{"sku": "sku-1", "qty": 1}],
    },
    "OrderPaid": {"userId": "u-1", "amount": "10.00", "paidAt": OCCURRED_AT},
    "OrderCancelled": {"userId": "u-1", "reason": "changed my mind"},
}


def envelope(
    event_id: str,
    *,
    aggregate_id: str = "o-1",
    version: int | None = 1,
    event_type: str = "OrderPaid",
    event_version: int = 1,
    data: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A camelCase envelope; ``version=None`` leaves ``aggregateVersion`` out."""
    env: dict[str, Any] = {
        "eventId": event_id,
        "eventType": event_type,
        "eventVersion": event_version,
        "aggregateType": "Order",
        "aggregateId": aggregate_id,
        "occurredAt": OCCURRED_AT,
        "data": data
        if data is not None
        else {"orderId": aggregate_id, **_DATA.get(event_type, {"anything": True})},
    }
    if version is not None:
        env["aggregateVersion"] = version
    env.update(extra)
    return env


class Records(PublicRecords):
    """Records with increasing offsets on one partition of ``TOPIC`` (``app.testing.Records``),
    each carrying the ``traceparent`` header a producer adds."""

    def __init__(self, partition: int = 0) -> None:
        super().__init__(TOPIC, partition)

    def raw(
        self,
        value: bytes | None,
        key: bytes | None = b"o-1",
        headers: tuple[tuple[str, bytes], ...] = (("traceparent", b"00-abc-01"),),
        topic: str | None = None,
    ) -> RawRecord:
        """A record carrying exactly ``value``."""
        return super().raw(value, key, headers, topic)

    def event(self, event_id: str, **fields: Any) -> RawRecord:
        """A record carrying ``envelope(event_id, **fields)`` as JSON."""
        env = envelope(event_id, **fields)
        return self.raw(orjson.dumps(env), key=env["aggregateId"].encode())

    def again(self, record: RawRecord) -> RawRecord:
        """The same bytes delivered again at a new offset (a producer retry)."""
        return self.raw(record.value, record.key)

    def delivered(
        self, out: OutRecord | Message, extra_headers: tuple[tuple[str, bytes], ...] = ()
    ) -> RawRecord:
        """A published record as the broker hands it out: on its own topic, at a new offset
        (``extra_headers`` appended, as an operator's tool would)."""
        return super().raw(out.value, out.key, (*out.headers, *extra_headers), out.topic)
