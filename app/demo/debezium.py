"""Records as Debezium's outbox event router emits an outbox row, byte for byte.

The shapes are those Debezium 3.6's ``EventRouter`` was seen to produce (see the
README, "Events from Debezium"): the row's payload column is the event (here
without ``aggregateId``, which the key carries, and per order without
``eventId``, ``eventType`` or ``aggregateType``, which the ``id``,
``eventType`` and ``aggregateType`` headers carry), and the converters wrap it:

===  ==================  ========================  ==========================
     payload column      table.expand.json.payload converter (key and value)
===  ==================  ========================  ==========================
0    TEXT                false                     StringConverter
1    TEXT                false                     JsonConverter
2    TEXT                false                     JsonConverter, schemas
3    JSONB               false                     JsonConverter, schemas
4    TEXT                true                      JsonConverter
5    TEXT                true                      JsonConverter, schemas
===  ==================  ========================  ==========================

Headers come through one of the three header converters (SimpleHeaderConverter:
raw; JsonConverter: JSON-quoted; JsonConverter with schemas: wrapped). The
StringConverter with ``expand`` (a ``Struct{...}`` text, not JSON) is left out:
the consumer rejects it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from app.demo.envelopes import Message

SHAPES = 6
HEADER_STYLES = 3
CONTEXT = (
    ("__debezium.context.connectorLogicalName", "outbox"),
    ("__debezium.context.taskId", "0"),
    ("__debezium.context.connectorName", "postgresql"),
    ("__debezium.context.runId", "01a23c39-0948-7fbb-9693-2d14e4da2a16"),
)
_STRING_SCHEMA = b'{"type":"string","optional":false}'
_JSON_SCHEMA = b'{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1}'


class OutboxRow(NamedTuple):
    """An ``outbox_event`` row as the producer's transaction inserts it."""

    event_id: str
    aggregate_type: str
    aggregate_id: str
    event_type: str
    aggregate_version: int | None
    payload: dict[str, Any]  # the payload column's JSON

    @property
    def payload_text(self) -> str:
        """The payload as a TEXT column holds it: the producer's own JSON text."""
        return orjson.dumps(self.payload).decode()


def outbox_row(env: dict[str, Any], order: int) -> OutboxRow:
    """The outbox row of ``env``: ids in the payload as JSON integers, the aggregate id
    left to the key, and per ``order`` (the order's number in the workload) the event
    id, type and aggregate type left to the headers."""
    aggregate = str(env["aggregateId"])
    data = {**env["data"], "orderId": int(aggregate), "userId": int(env["data"]["userId"])}
    payload = {k: v for k, v in env.items() if k != "aggregateId"} | {"data": data}
    if order % 2 == 0:
        del payload["eventId"]
    if order % 4 in (0, 1):
        del payload["eventType"]
    if order % 3 == 1:
        del payload["aggregateType"]
    return OutboxRow(
        str(env["eventId"]),
        str(env["aggregateType"]),
        aggregate,
        str(env["eventType"]),
        env.get("aggregateVersion"),
        payload,
    )


def router_record(env: dict[str, Any], order: int) -> Message:
    """The record the router emits for ``env``'s outbox row; ``order`` picks the shape and
    the header converter (and the row's fields, see ``outbox_row``), the same for all of
    one order's events."""
    row = outbox_row(env, order)
    headers = [("id", row.event_id), ("eventType", row.event_type)]
    if order % 3 == 1:
        headers.append(("aggregateType", row.aggregate_type))
    shape = order % SHAPES
    style = order // SHAPES % HEADER_STYLES
    key, value = _key_and_value(shape, row.aggregate_id, row.payload)
    wire = [(name, _header(style, text)) for name, text in (*CONTEXT, *headers)]
    return Message(key, value, tuple(wire))


def _key_and_value(shape: int, aggregate: str, payload: dict[str, Any]) -> tuple[bytes, bytes]:
    text = orjson.dumps(payload)  # a TEXT column keeps the producer's bytes
    if shape == 0:
        return aggregate.encode(), text
    if shape == 1:
        return orjson.dumps(aggregate), orjson.dumps(text.decode())
    if shape == 2:
        return _wrapped(_STRING_SCHEMA, aggregate), _wrapped(_STRING_SCHEMA, text.decode())
    if shape == 3:
        return _wrapped(_STRING_SCHEMA, aggregate), _wrapped(_JSON_SCHEMA, jsonb_text(payload))
    expanded = _expanded(payload)
    if shape == 4:
        return orjson.dumps(aggregate), orjson.dumps(expanded)
    schema = orjson.dumps(struct_schema(expanded, "payload"))
    return _wrapped(_STRING_SCHEMA, aggregate), _wrapped(schema, expanded)


def _header(style: int, text: str) -> bytes:
    if style == 0:
        return text.encode()
    if style == 1:
        return orjson.dumps(text)
    return _wrapped(_STRING_SCHEMA, text)


def _wrapped(schema: bytes, payload: Any) -> bytes:
    """Kafka Connect's JsonConverter with ``schemas.enable=true``."""
    return b'{"schema":' + schema + b',"payload":' + orjson.dumps(payload) + b"}"


def _expanded(value: Any) -> Any:
    """What ``table.expand.json.payload=true`` leaves of a JSON value: nulls and empty
    arrays gone (it also turns decimals into doubles; the workload's amounts are already)."""
    if isinstance(value, dict):
        return {k: _expanded(v) for k, v in value.items() if v is not None and v != []}
    if isinstance(value, list):
        return [_expanded(v) for v in value]
    return value


def jsonb_text(value: Any) -> str:
    """``value`` as PostgreSQL prints a JSONB column: keys by length then bytes, ``", "`` and
    ``": "`` between items."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        items = (f"{orjson.dumps(k).decode()}: {jsonb_text(value[k])}" for k in keys)
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    return orjson.dumps(value).decode()


def struct_schema(value: Any, name: str) -> dict[str, Any]:
    """The Kafka Connect schema JsonConverter writes for an expanded payload."""
    if isinstance(value, dict):
        fields = [{**struct_schema(v, f"{name}.{k}"), "field": k} for k, v in value.items()]
        return {"type": "struct", "fields": fields, "optional": True, "name": name}
    if isinstance(value, list):
        items = struct_schema(value[0], name) if value else {"type": "string"}
        return {"type": "array", "items": items, "optional": True}
    if isinstance(value, bool):
        return {"type": "boolean", "optional": True}
    if isinstance(value, int):
        kind = "int32" if -(2**31) <= value < 2**31 else "int64"
        return {"type": kind, "optional": True}
    if isinstance(value, float):
        return {"type": "double", "optional": True}
    return {"type": "string", "optional": True}
