"""Poison found before its envelope was read is named by what can be read of it.

Contract: a record refused for a header (``retry-attempt: soon``), for a value that holds
no JSON object (Debezium's router with a null payload, text that is no JSON), or for a
key that is no text, still names the eventId, eventType, aggregate and version that its
value, key and headers say where they say them (``Named``), so that its failure row, DLT
headers and ``trace`` find it; where nothing names an event or an aggregate it names
nothing (a default aggregate type alone is no name). An operator's skip of such a record
for a consumer (the framework's replay headers added, the record's own kept) takes its
version for that consumer when its eventId and aggregate can be read, as for a
record whose envelope failed validation.
"""

from __future__ import annotations

import orjson

from app.pipeline.decode import Decoded, Named, Poison, decode
from app.records import RawRecord
from tests.pipeline.events import envelope

WRAPPED_NULL = b'{"schema":{"type":"string","optional":true},"payload":null}'
SKIP_FOR_POINTS = (
    ("dlt-original-topic", b"orders"),
    ("retry-consumer-group", b"points"),
    ("retry-action", b"skip"),
)


def poison(key: bytes | None, value: bytes | None, *headers: tuple[str, bytes]) -> Poison:
    found = decode(RawRecord("orders", 1, 12, key, value, headers))
    assert isinstance(found, Poison), found
    return found


def test_a_bad_framework_header_names_what_the_value_says() -> None:
    value = orjson.dumps(envelope("e-7", aggregate_id="o-7", version=3))
    found = poison(b"o-7", value, ("retry-attempt", b"soon"))
    assert found.named == Named("e-7", "OrderPaid", "Order", "o-7", 3)
    assert found.event_type == "OrderPaid"


def test_a_value_with_no_object_is_named_by_its_key_and_headers() -> None:
    found = poison(b"o-8", WRAPPED_NULL, ("id", b"en-1"), ("eventType", b"OrderPaid"))
    assert found.named == Named("en-1", "OrderPaid", "ORDER", "o-8", None)
    # Its skip for a consumer takes it for that consumer: no handler, no version to take.
    record = RawRecord("orders", 1, 90, b"o-8", WRAPPED_NULL, (("id", b"en-1"), *SKIP_FOR_POINTS))
    skipped = decode(record)
    assert isinstance(skipped, Decoded), skipped
    assert (skipped.event_id, skipped.trip.consumer, skipped.trip.skip) == ("en-1", "points", True)
    assert skipped.event.aggregate == ("ORDER", "o-8")


def test_a_record_that_names_nothing_is_named_nothing() -> None:
    assert poison(None, b"{not json").named is None
    # A key that is no text names no aggregate either.
    assert poison(b'{"id": 1}', b"{not json").named is None
