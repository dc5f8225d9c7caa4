"""How events arrive on the wire, read into the envelope's one shape. Pure, no I/O.

A record is taken the way its producer wrote it; this module finds the envelope
in it (the shapes are those Debezium's outbox event router emits, see the README):

- value: a JSON object (the envelope); a JSON string holding that object (Kafka
  Connect's JsonConverter writes a text column, such as the outbox payload, that
  way); either one inside ``{"schema": ..., "payload": ...}`` (JsonConverter with
  ``schemas.enable=true``);
- key and headers: UTF-8 text as it is, JSON-quoted (``"100001"``), or
  schema-wrapped.

Fields the value lacks (absent or null) are taken from the record:

==============  ===========================================================
eventId         the ``id`` header (the outbox event router's event id)
eventType       the ``eventType`` header
aggregateId     the record key
aggregateType   the ``aggregateType`` header, else ``DEFAULT_AGGREGATE_TYPE``
==============  ===========================================================

The record itself is never changed: a parked, retried or dead-lettered record
keeps its bytes, and reads the same way every time it is decoded.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson

from app.errors import InvalidSchemaError, UndecodableError
from app.records import RawRecord
from schemas.ids import id_text

# (field, its snake_case name, the header it falls back to)
_FROM_HEADERS = (("eventId", "event_id", "id"), ("eventType", "event_type", "eventType"))

LOOKED_ELSEWHERE = {
    "eventId": "not in the value, nor in an id header",
    "eventType": "not in the value, nor in an eventType header",
    "aggregateId": "not in the value, and the record has no key",
}
"""Where a field missing from the envelope was looked for too, for the poison's message."""

STRUCT = b"Struct{"
STRUCT_MESSAGE = (
    "value is a Kafka Connect Struct printed as text, not JSON: Debezium's outbox event "
    "router with table.expand.json.payload=true and the StringConverter writes it. Set "
    "table.expand.json.payload=false (the payload then travels as its JSON text), or use "
    "the JsonConverter for values"
)


def envelope_object(record: RawRecord, default_aggregate_type: str) -> dict[str, Any]:
    """The envelope ``record`` carries, as a JSON object with what its value lacks taken
    from the record. Raises ``UndecodableError`` when the value holds no JSON object,
    ``InvalidSchemaError`` when a field it lacks is in a key or header that is no text."""
    raw = _object(record.value)
    for field, name, header in _FROM_HEADERS:
        if _absent(raw, field, name):
            found = _header(record, header, field)
            if found is not None:
                raw[field] = found
    if _absent(raw, "aggregateId", "aggregate_id"):
        found = _key(record)
        if found is not None:
            raw["aggregateId"] = found
    if _absent(raw, "aggregateType", "aggregate_type"):
        raw["aggregateType"] = _aggregate_type(record, default_aggregate_type)
    return raw


def with_aggregate(
    record: RawRecord, missing: Collection[str], default_aggregate_type: str
) -> bytes | None:
    """For the one-pass decode: the value of ``record``, a plain JSON object that does not
    name its aggregate, with the ``missing`` aggregate fields (``aggregateId``,
    ``aggregateType``) written in front, taken from the record as ``envelope_object``
    takes them; ``None`` when the record cannot supply them. The record's bytes stay as
    they are."""
    value = record.value
    if not value:
        return None
    front = b""
    try:
        if "aggregateId" in missing:
            key = _key(record)
            if key is None:
                return None
            front += b'"aggregateId":' + orjson.dumps(key) + b","
        if "aggregateType" in missing:
            kind = _aggregate_type(record, default_aggregate_type)
            front += b'"aggregateType":' + orjson.dumps(kind) + b","
    except InvalidSchemaError:
        return None
    return b"{" + front + value[1:]


def _object(value: bytes | None) -> dict[str, Any]:
    try:
        raw: Any = orjson.loads(value or b"")
    except orjson.JSONDecodeError as exc:
        if value and value.startswith(STRUCT):
            raise UndecodableError(STRUCT_MESSAGE) from None
        raise UndecodableError(f"value is not JSON: {exc}") from None
    if _schema_wrapped(raw):
        raw = raw["payload"]
    if type(raw) is str:
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UndecodableError(
                "value is a JSON string (as Kafka Connect's JsonConverter writes a text "
                f"column) whose text is not JSON: {exc}"
            ) from None
        if not isinstance(raw, dict):
            raise UndecodableError(
                f"value is a JSON string holding JSON {type(raw).__name__}, not an object"
            )
    if not isinstance(raw, dict):
        raise UndecodableError(f"value is JSON {type(raw).__name__}, not an object")
    return raw


def _schema_wrapped(raw: Any) -> bool:
    """True for Kafka Connect's JsonConverter envelope (``schemas.enable=true``)."""
    return type(raw) is dict and len(raw) == 2 and "schema" in raw and "payload" in raw


def _absent(raw: dict[str, Any], field: str, name: str) -> bool:
    return raw.get(field) is None and raw.get(name) is None


def _key(record: RawRecord) -> str | None:
    if not record.key:
        return None
    return _text(record.key, "aggregateId: not in the value, and the record key")


def _aggregate_type(record: RawRecord, default: str) -> str:
    found = _header(record, "aggregateType", "aggregateType")
    return default if found is None else found


def _header(record: RawRecord, header: str, field: str) -> str | None:
    value = record.header(header)
    if not value:
        return None
    return _text(value, f"{field}: not in the value, and header {header}")


def _text(data: bytes, what: str) -> str | None:
    """Key or header bytes as text: as they are, JSON-quoted, or schema-wrapped; ``None``
    for a wrapped null."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise InvalidSchemaError(f"{what} is not UTF-8 text") from None
    if data[:1] not in (b'"', b"{"):
        return text
    try:
        parsed: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        return text
    if _schema_wrapped(parsed):
        parsed = parsed["payload"]
        if parsed is None:
            return None
    found = id_text(parsed)
    return text if found is None else found
