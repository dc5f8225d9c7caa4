"""Record headers survive storage as JSON exactly, and a record names its position.

Contract: ``headers_from_json(headers_to_json(h)) == h`` for any headers:
empty, binary values, empty values, non-ASCII names, repeated names in their
order. The JSON text is plain (values base64) so it fits a TEXT column.
``RawRecord.header`` returns the last value of a name (Kafka's convention
for repeated headers) or ``None``; ``position`` is ``topic[partition]@offset``.
"""

from __future__ import annotations

import json

import pytest

from app.records import RawRecord, headers_from_json, headers_to_json

HEADERS = [
    (),
    (("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),),
    (("bin", bytes(range(256))),),
    (("empty", b""),),
    (("überschrift", "ü€".encode()),),
    (("retry", b"1"), ("other", b"x"), ("retry", b"2")),
]


@pytest.mark.parametrize("headers", HEADERS)
def test_headers_round_trip_through_json(headers: tuple[tuple[str, bytes], ...]) -> None:
    text = headers_to_json(headers)

    assert isinstance(text, str)
    assert headers_from_json(text) == headers


def test_the_json_is_plain_names_and_base64_values() -> None:
    text = headers_to_json((("k", b"\x00\xff"),))

    assert json.loads(text) == [["k", "AP8="]]


def test_header_returns_the_last_value_of_a_name() -> None:
    record = RawRecord(
        "orders", 2, 41, b"k", b"v", headers=(("retry", b"1"), ("x", b""), ("retry", b"2"))
    )

    assert record.header("retry") == b"2"
    assert record.header("x") == b""
    assert record.header("missing") is None


def test_position_names_topic_partition_and_offset() -> None:
    assert (
        RawRecord("order-event-topic", 3, 1024, None, None).position == "order-event-topic[3]@1024"
    )
