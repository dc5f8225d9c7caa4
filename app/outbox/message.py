"""What the relay sends for a row: topic, key, value and headers, or why it cannot.

A business row is sent as written: value = ``payload`` (UTF-8, verbatim; it must be
JSON, or consumers could not read it), key = ``event_key`` or else
``aggregate_id``, headers = the ``headers`` JSON object plus ``id`` = ``event_id``,
``eventType`` = ``event_type`` and ``aggregateType`` = ``aggregate_type`` (the columns
win over a hand-written row's headers of those names), as Debezium's outbox router
sends them with the connector in ``ops/debezium``: a consumer takes an envelope field
the payload leaves out from those headers (``app.pipeline.wire``), whichever of the two
shipped the row. A row of the worker's own records is sent from its ``record_*``
columns, byte for byte (``app.outbox.records``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from app.pipeline.wire import AGGREGATE_TYPE_HEADER, EVENT_ID_HEADER, EVENT_TYPE_HEADER
from app.records import headers_from_json
from dlq import headers as h
from dlq.topics import topic_name

_KAFKA_TOPIC = topic_name()
TOPIC_RULE = "letters, digits, '.', '_' and '-', not '.' or '..'"

COLUMN_HEADERS = (EVENT_ID_HEADER, EVENT_TYPE_HEADER, AGGREGATE_TYPE_HEADER)
"""The headers a business row's columns set (``event_id``, ``event_type``,
``aggregate_type``), in that order."""
# What is kept of the failure's text in a record that had to be shortened.
SHORT_MESSAGE_BYTES = 200
LEFT_OUT = b"(left out: the record was too large for its topic)"


class Message(NamedTuple):
    """One record to publish."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


class BadRow(Exception):
    """The row can never become a record as it is (its attempt fails with this message)."""


def message_of(row: Mapping[str, Any]) -> Message:
    """The record for ``row``; raises ``BadRow`` when the row cannot be one."""
    if not _KAFKA_TOPIC.fullmatch(row["topic"] or ""):
        # A row written by hand: the broker refuses the name, and aiokafka would wait for
        # its metadata as for a broker out of reach, holding every row behind it.
        raise BadRow(f"topic {row['topic']!r} is no Kafka topic name ({TOPIC_RULE})")
    if row["record_headers"] is not None:
        try:
            headers = headers_from_json(row["record_headers"])
        except (ValueError, TypeError) as exc:
            raise BadRow(f"record_headers is not a JSON list of [name, base64]: {exc}") from None
        return Message(row["topic"], row["record_key"], row["record_value"], headers)
    payload: str = row["payload"]
    try:
        orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise BadRow(f"payload is not JSON: {exc}") from None
    key = row["event_key"] or row["aggregate_id"]
    return Message(row["topic"], key.encode(), payload.encode(), _headers(row))


def _headers(row: Mapping[str, Any]) -> tuple[tuple[str, bytes], ...]:
    named: dict[str, Any] = {}
    if row["headers"]:
        try:
            named = orjson.loads(row["headers"])
        except orjson.JSONDecodeError as exc:
            raise BadRow(f"headers is not JSON: {exc}") from None
        if not isinstance(named, dict) or not all(isinstance(v, str) for v in named.values()):
            raise BadRow("headers must be a JSON object of header name to text value")
    # The row's columns, whatever a hand-written row's headers say.
    named[EVENT_ID_HEADER] = row["event_id"]
    named[EVENT_TYPE_HEADER] = row["event_type"]
    named[AGGREGATE_TYPE_HEADER] = row["aggregate_type"]
    return tuple((name, value.encode()) for name, value in named.items())


def shortened(message: Message) -> Message | None:
    """``message`` with the framework's long headers cut (the stack trace left out, the
    exception's message to ``SHORT_MESSAGE_BYTES``), for a retry or dead-letter record the
    broker refused as too large; None when it has none left to cut. The original record's
    key, value and headers are never touched."""
    headers = []
    cut = False
    for name, value in message.headers:
        if name == h.DLT_EXCEPTION_STACKTRACE and value != LEFT_OUT:
            value, cut = LEFT_OUT, True
        elif name == h.DLT_EXCEPTION_MESSAGE and len(value) > SHORT_MESSAGE_BYTES:
            value, cut = value[:SHORT_MESSAGE_BYTES], True
        headers.append((name, value))
    return message._replace(headers=tuple(headers)) if cut else None
