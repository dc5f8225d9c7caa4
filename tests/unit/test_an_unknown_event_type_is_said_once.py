"""An eventType no payload model here knows is said once per process, at INFO.

Contract: such an event takes effect for nobody and advances every consumer's version
(legitimate on a topic other services share, a silent loss for a misspelt type): the
first one of each type logs one INFO line naming the type and where it was read; later
ones of that type log nothing; a known type, and an operator's skip record (its type is
the framework's, not a producer's), log nothing.
"""

from __future__ import annotations

import logging

import orjson
import pytest

import handlers  # noqa: F401  (registers the example payload models)
from app.pipeline import processor
from app.pipeline.decode import Decoded, decode
from app.records import RawRecord
from dlq import headers as h

PAID = {"orderId": "o-1", "userId": "u-1", "amount": "1.00", "paidAt": "2026-12-01T00:00:00Z"}


def event(event_type: str, offset: int, skip: bool = False) -> Decoded:
    value = {
        "eventId": f"e-{offset}",
        "eventType": event_type,
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-1",
        "aggregateVersion": offset + 1,
        "occurredAt": "2026-12-01T00:00:00Z",
        "data": PAID,
    }
    headers = (
        (
            (h.DLT_ORIGINAL_TOPIC, b"orders"),
            (h.RETRY_CONSUMER_GROUP, b"points-service"),
            (h.RETRY_ACTION, b"skip"),
        )
        if skip
        else ()
    )
    found = decode(RawRecord("orders", 0, offset, b"o-1", orjson.dumps(value), headers))
    assert isinstance(found, Decoded), found
    return found


def test_each_unknown_type_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processor, "_unknown_types_said", set())
    caplog.set_level(logging.INFO, logger="effectively_once.pipeline")

    processor._note_unknown_types(
        [event("OrderPayd", 0), event("OrderPaid", 1), event("OrderPayd", 2)]
    )
    processor._note_unknown_types([event("OrderPayd", 3), event("ShipmentLost", 4)])
    processor._note_unknown_types([event("VersionGivenUp", 5, skip=True)])

    lines = [r.getMessage() for r in caplog.records if r.name == "effectively_once.pipeline"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("eventType 'OrderPayd' (first at orders[0]@0) has no payload model")
    assert lines[1].startswith("eventType 'ShipmentLost' (first at orders[0]@4)")
