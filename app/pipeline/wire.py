"""How events arrive on the wire, read into the envelope's one shape. Pure, no I/O.

A record is taken the way its producer wrote it; this module finds the envelope
in it (the shapes are those Debezium's outbox event router emits, see the README):

- value: a JSON object (the envelope); a JSON string holding that object (Kafka
  Connect's JsonConverter writes a text column, such as the outbox payload, that
  way); either one inside ``{"schema": ..., "payload": ...}`` (JsonConverter with
  ``schemas.enable=true``);
- key and headers: UTF-8 text as it is, JSON-quoted (``"100001"``), or
  schema-wrapped; a JSON ``null`` is no value.

Fields the value lacks (absent, null or "" under both of the names the models
accept, camelCase and snake_case) are taken from the record (``SOURCES``, the one
definition both decode paths read), and stored under the camelCase name:

==============  ===========================================================
eventId         the ``id`` header (the outbox event router's event id; 16 bytes that
                are no text, a binary id column's, are read as a UUID)
eventType       the ``eventType`` header
aggregateId     the record key
aggregateType   the ``aggregateType`` header, else ``DEFAULT_AGGREGATE_TYPE``
==============  ===========================================================

The record itself is never changed: a parked, retried or dead-lettered record
keeps its bytes, and reads the same way every time it is decoded.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any, NamedTuple

import orjson
from pydantic_core import from_json

from app.errors import InvalidSchemaError, PoisonError, UndecodableError
from app.records import RawRecord
from schemas.ids import id_text


class Source(NamedTuple):
    """Where an envelope field is read: the value, under ``field`` or ``name``, else the
    record's ``header`` (or key)."""

    field: str  # camelCase, as producers write it (the models' alias)
    name: str  # snake_case, which the models accept too
    header: str | None  # the header it falls back to; None: the record key
    quoted: tuple[bytes, bytes]  # both names as JSON strings, for ``named_in``

    def named_in(self, value: bytes) -> bool:
        """Whether the bytes of ``value`` show either name of the field as a JSON string (a
        byte search: it may find one that is nested, or miss one written with escapes)."""
        camel, snake = self.quoted
        return camel in value or snake in value


def _source(field: str, name: str, header: str | None) -> Source:
    return Source(field, name, header, (f'"{field}"'.encode(), f'"{name}"'.encode()))


# The headers a field falls back to (the outbox relay sets each from its row's column).
EVENT_ID_HEADER = "id"
EVENT_TYPE_HEADER = "eventType"
AGGREGATE_TYPE_HEADER = "aggregateType"

EVENT_ID = _source("eventId", "event_id", EVENT_ID_HEADER)
EVENT_TYPE = _source("eventType", "event_type", EVENT_TYPE_HEADER)
AGGREGATE_ID = _source("aggregateId", "aggregate_id", None)
AGGREGATE_TYPE = _source("aggregateType", "aggregate_type", AGGREGATE_TYPE_HEADER)
SOURCES = (EVENT_ID, EVENT_TYPE, AGGREGATE_ID, AGGREGATE_TYPE)
"""Every field the record may supply, in the order ``envelope_object`` looks."""
AGGREGATE = (AGGREGATE_ID, AGGREGATE_TYPE)

LOOKED_ELSEWHERE = {
    "eventId": "not in the value, nor in an id header",
    "eventType": "not in the value, nor in an eventType header",
    "aggregateId": "not in the value, and the record has no key",
}
"""Where a field missing from the envelope was looked for too, for the poison's message."""

STRUCT = b"Struct{"
BOM = b"\xef\xbb\xbf"
"""UTF-8's byte order mark: JSON text may start with one, and a reader may ignore it."""
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
    return _completed(_object(record.value), record, default_aggregate_type, strict=True)


def readable_fields(record: RawRecord, default_aggregate_type: str) -> dict[str, Any]:
    """What can be read of the envelope of a record that ``envelope_object`` (or its
    headers) refused, so that its poison still names the event: the value's JSON object if
    it holds one (else nothing of it), and each field the value lacks from a key or header
    that is text (the default aggregate type at last). Never raises."""
    try:
        raw = _object(record.value)
    except PoisonError:
        raw = {}
    return _completed(raw, record, default_aggregate_type, strict=False)


def _completed(
    raw: dict[str, Any], record: RawRecord, default_aggregate_type: str, strict: bool
) -> dict[str, Any]:
    """``raw`` with each field of ``SOURCES`` it lacks under its camelCase name taken from
    its snake_case name, else from the record (the one name every reader uses). A key or
    header that is no text raises ``InvalidSchemaError`` when ``strict``, else leaves the
    field out."""
    for source in SOURCES:
        if raw.get(source.field) in _ABSENT:
            found = raw.pop(source.name, None)
            if found in _ABSENT:
                try:
                    found = from_record(record, source, default_aggregate_type)
                except PoisonError:
                    if strict:
                        raise
                    found = None
            if found is not None:
                raw[source.field] = found
    return raw


# A field a producer left empty: a JSON null, or "" (a Go struct's zero value without
# ``omitempty``); the record's key or header, or the default, supplies it then.
_ABSENT = (None, "")


def from_record(record: RawRecord, source: Source, default_aggregate_type: str) -> str | None:
    """The field of ``source`` as the record supplies it (its header or key; the default
    aggregate type at last), or ``None``. ``InvalidSchemaError`` when that is no text."""
    if source.header is None:
        return _key(record)
    found = _header(record, source.header, source.field)
    if found is None and source is AGGREGATE_TYPE:
        return default_aggregate_type
    return found


def with_aggregate(
    record: RawRecord, missing: Collection[Source], default_aggregate_type: str
) -> bytes | None:
    """For the one-pass decode: the value of ``record``, a plain JSON object, with the
    ``missing`` aggregate fields (``AGGREGATE``: fields it does not name) written in front,
    taken from the record as ``envelope_object`` takes them; ``None`` when the record
    cannot supply them. The record's bytes stay as they are."""
    value = record.value
    if not value:
        return None
    front = b""
    try:
        for source in missing:
            found = from_record(record, source, default_aggregate_type)
            if found is None:
                return None
            front += b'"' + source.field.encode() + b'":' + orjson.dumps(found) + b","
    except InvalidSchemaError:
        return None
    return b"{" + front + value[1:]


TOMBSTONE_MESSAGE = (
    "the record has no value (a tombstone: a delete marker for log compaction, no event; "
    "Debezium's outbox event router writes one for an empty payload with "
    "route.tombstone.on.empty.payload=true)"
)


def _loads(data: bytes | str) -> Any:
    """JSON as Python, integers exact at any size (orjson reads one beyond 64 bits as a
    float, which no id may be: the one-pass decode, pydantic's, keeps them, and both
    paths must agree); ``NaN`` and ``Infinity`` are no JSON. ``ValueError`` if it is none."""
    return from_json(data, allow_inf_nan=False)


def _object(value: bytes | None) -> dict[str, Any]:
    if value is None:
        raise UndecodableError(TOMBSTONE_MESSAGE)
    if value.startswith(BOM):
        value = value[len(BOM) :]  # a byte order mark, as some Windows tools write (RFC 8259)
    try:
        raw: Any = _loads(value)
    except ValueError as exc:
        if value.startswith(STRUCT):
            raise UndecodableError(STRUCT_MESSAGE) from None
        if not value:
            raise UndecodableError("the record's value is empty (0 bytes), not JSON") from None
        raise UndecodableError(f"value is not JSON: {_json_error(exc)}") from None
    if _schema_wrapped(raw):
        raw = raw["payload"]
    if type(raw) is str:
        try:
            raw = _loads(raw)
        except ValueError as exc:
            raise UndecodableError(
                "value is a JSON string (as Kafka Connect's JsonConverter writes a text "
                f"column) whose text is not JSON: {_json_error(exc)}"
            ) from None
        if not isinstance(raw, dict):
            raise UndecodableError(
                f"value is a JSON string holding {json_kind(raw)}, not an object"
            )
    if not isinstance(raw, dict):
        raise UndecodableError(f"value is {json_kind(raw)}, not a JSON object")
    return raw


def _schema_wrapped(raw: Any) -> bool:
    """True for Kafka Connect's JsonConverter envelope (``schemas.enable=true``)."""
    return type(raw) is dict and len(raw) == 2 and "schema" in raw and "payload" in raw


def _key(record: RawRecord) -> str | None:
    if not record.key:
        return None
    return _text(record.key, "aggregateId: not in the value, and the record key")


def _header(record: RawRecord, header: str, field: str) -> str | None:
    value = record.header(header)
    if not value:
        return None
    if header == EVENT_ID_HEADER and len(value) == _UUID_BYTES and not _printable(value):
        # A binary(16) id column's raw bytes (Debezium's router copies the column as it is).
        return str(uuid.UUID(bytes=value))
    return _text(value, f"{field}: not in the value, and header {header}")


_UUID_BYTES = 16


def _printable(data: bytes) -> bool:
    """True when ``data`` is UTF-8 text without control characters."""
    try:
        return data.decode().isprintable()
    except UnicodeDecodeError:
        return False


def _text(data: bytes, what: str) -> str | None:
    """Key or header bytes as text: as they are, JSON-quoted, or schema-wrapped; ``None``
    for a null, bare or wrapped."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise InvalidSchemaError(f"{what} is not UTF-8 text") from None
    if data == b"null":
        return None  # JSON's null: Kafka Connect's JsonConverter, Go's json.Marshal(nil)
    if data[:1] not in (b'"', b"{", b"["):
        return text
    try:
        parsed: Any = _loads(data)
    except ValueError:
        return text
    if _schema_wrapped(parsed):
        parsed = parsed["payload"]
        if parsed is None:
            return None
        found = id_text(parsed)
        if found is None:  # a struct, a boolean, a Decimal's base64...: no id
            raise InvalidSchemaError(
                f"{what} is a Kafka Connect value holding {json_kind(parsed)}, "
                "not text or an integer"
            )
        return found
    if isinstance(parsed, dict | list):
        # Kafka Connect's JsonConverter writes a struct key so with schemas.enable=false: no
        # id, and taken as text it would be an aggregate of its own (README: objects as ids
        # are poison).
        raise InvalidSchemaError(
            f"{what} is {json_kind(parsed)}, not text or an integer: put the id in the "
            "value, or key the record by the id's text"
        )
    found = id_text(parsed)
    return text if found is None else found


def json_kind(value: Any) -> str:
    """What ``value`` (parsed JSON) is, in JSON's words: "a JSON object", "JSON null"..."""
    if value is None:
        return "JSON null"
    return "a JSON " + _KINDS.get(type(value), "value")


_KINDS = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
}


def _json_error(exc: ValueError) -> str:
    """orjson's message, its "key" said as a JSON object's (not the record's key)."""
    return str(exc).replace("key must be a string", "an object's key must be a quoted string")
