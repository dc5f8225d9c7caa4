# ruff: noqa: E501  (recorded bytes, kept on one line each)
"""The exact records Debezium 3.6.3's outbox ``EventRouter`` emitted for two outbox rows.

Recorded with the real engine (PostgreSQL 15, ``pgoutput``; router options
``table.field.event.id=event_id``, ``table.field.event.key=aggregate_id``,
``table.field.event.payload=payload``, ``route.by.field=aggregate_type``,
``table.fields.additional.placement=event_type:header:eventType``), one entry per
payload column type, ``table.expand.json.payload`` and converter. Key and value bytes
are exactly as the converters wrote them; headers depend only on the header converter.
"""

from __future__ import annotations

from typing import NamedTuple


class Shape(NamedTuple):
    """One combination of payload column, ``expand``, converter, and its bytes."""

    column: str
    expand: bool
    converter: str
    key: bytes
    value: bytes


ENVELOPE_ROW = [
    Shape(
        "JSONB",
        False,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'"{\\"data\\": {\\"amount\\": 199.00, \\"userId\\": 20001, \\"orderId\\": 100001, \\"orderNo\\": \\"ORD202607160001\\"}, \\"eventId\\": \\"01JY1N5H2J3Q8A5W9M7K2D4P6R\\", \\"eventType\\": \\"OrderCreated\\", \\"occurredAt\\": \\"2026-07-16T10:30:00Z\\", \\"aggregateId\\": \\"100001\\", \\"eventVersion\\": 1, \\"aggregateType\\": \\"ORDER\\", \\"aggregateVersion\\": 1}"',
    ),
    Shape(
        "JSONB",
        False,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1},"payload":"{\\"data\\": {\\"amount\\": 199.00, \\"userId\\": 20001, \\"orderId\\": 100001, \\"orderNo\\": \\"ORD202607160001\\"}, \\"eventId\\": \\"01JY1N5H2J3Q8A5W9M7K2D4P6R\\", \\"eventType\\": \\"OrderCreated\\", \\"occurredAt\\": \\"2026-07-16T10:30:00Z\\", \\"aggregateId\\": \\"100001\\", \\"eventVersion\\": 1, \\"aggregateType\\": \\"ORDER\\", \\"aggregateVersion\\": 1}"}',
    ),
    Shape(
        "JSONB",
        False,
        "StringConverter",
        b"100001",
        b'{"data": {"amount": 199.00, "userId": 20001, "orderId": 100001, "orderNo": "ORD202607160001"}, "eventId": "01JY1N5H2J3Q8A5W9M7K2D4P6R", "eventType": "OrderCreated", "occurredAt": "2026-07-16T10:30:00Z", "aggregateId": "100001", "eventVersion": 1, "aggregateType": "ORDER", "aggregateVersion": 1}',
    ),
    Shape(
        "JSONB",
        True,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'{"data":{"amount":199.0,"userId":20001,"orderId":100001,"orderNo":"ORD202607160001"},"eventId":"01JY1N5H2J3Q8A5W9M7K2D4P6R","eventType":"OrderCreated","occurredAt":"2026-07-16T10:30:00Z","aggregateId":"100001","eventVersion":1,"aggregateType":"ORDER","aggregateVersion":1}',
    ),
    Shape(
        "JSONB",
        True,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"double","optional":true,"field":"amount"},{"type":"int32","optional":true,"field":"userId"},{"type":"int32","optional":true,"field":"orderId"},{"type":"string","optional":true,"field":"orderNo"}],"optional":true,"name":"payload.data","field":"data"},{"type":"string","optional":true,"field":"eventId"},{"type":"string","optional":true,"field":"eventType"},{"type":"string","optional":true,"field":"occurredAt"},{"type":"string","optional":true,"field":"aggregateId"},{"type":"int32","optional":true,"field":"eventVersion"},{"type":"string","optional":true,"field":"aggregateType"},{"type":"int32","optional":true,"field":"aggregateVersion"}],"optional":true,"name":"payload"},"payload":{"data":{"amount":199.0,"userId":20001,"orderId":100001,"orderNo":"ORD202607160001"},"eventId":"01JY1N5H2J3Q8A5W9M7K2D4P6R","eventType":"OrderCreated","occurredAt":"2026-07-16T10:30:00Z","aggregateId":"100001","eventVersion":1,"aggregateType":"ORDER","aggregateVersion":1}}',
    ),
    Shape(
        "JSONB",
        True,
        "StringConverter",
        b"100001",
        b"Struct{data=Struct{amount=199.0,userId=20001,orderId=100001,orderNo=ORD202607160001},eventId=01JY1N5H2J3Q8A5W9M7K2D4P6R,eventType=OrderCreated,occurredAt=2026-07-16T10:30:00Z,aggregateId=100001,eventVersion=1,aggregateType=ORDER,aggregateVersion=1}",
    ),
    Shape(
        "TEXT",
        False,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'"{\\"eventId\\":\\"01JY1N5H2J3Q8A5W9M7K2D4P6R\\",\\"eventType\\":\\"OrderCreated\\",\\"eventVersion\\":1,\\"occurredAt\\":\\"2026-07-16T10:30:00Z\\",\\"aggregateType\\":\\"ORDER\\",\\"aggregateId\\":\\"100001\\",\\"aggregateVersion\\":1,\\"data\\":{\\"orderId\\":100001,\\"orderNo\\":\\"ORD202607160001\\",\\"userId\\":20001,\\"amount\\":199.00}}"',
    ),
    Shape(
        "TEXT",
        False,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"string","optional":false},"payload":"{\\"eventId\\":\\"01JY1N5H2J3Q8A5W9M7K2D4P6R\\",\\"eventType\\":\\"OrderCreated\\",\\"eventVersion\\":1,\\"occurredAt\\":\\"2026-07-16T10:30:00Z\\",\\"aggregateType\\":\\"ORDER\\",\\"aggregateId\\":\\"100001\\",\\"aggregateVersion\\":1,\\"data\\":{\\"orderId\\":100001,\\"orderNo\\":\\"ORD202607160001\\",\\"userId\\":20001,\\"amount\\":199.00}}"}',
    ),
    Shape(
        "TEXT",
        False,
        "StringConverter",
        b"100001",
        b'{"eventId":"01JY1N5H2J3Q8A5W9M7K2D4P6R","eventType":"OrderCreated","eventVersion":1,"occurredAt":"2026-07-16T10:30:00Z","aggregateType":"ORDER","aggregateId":"100001","aggregateVersion":1,"data":{"orderId":100001,"orderNo":"ORD202607160001","userId":20001,"amount":199.00}}',
    ),
    Shape(
        "TEXT",
        True,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'{"eventId":"01JY1N5H2J3Q8A5W9M7K2D4P6R","eventType":"OrderCreated","eventVersion":1,"occurredAt":"2026-07-16T10:30:00Z","aggregateType":"ORDER","aggregateId":"100001","aggregateVersion":1,"data":{"orderId":100001,"orderNo":"ORD202607160001","userId":20001,"amount":199.0}}',
    ),
    Shape(
        "TEXT",
        True,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"field":"eventId"},{"type":"string","optional":true,"field":"eventType"},{"type":"int32","optional":true,"field":"eventVersion"},{"type":"string","optional":true,"field":"occurredAt"},{"type":"string","optional":true,"field":"aggregateType"},{"type":"string","optional":true,"field":"aggregateId"},{"type":"int32","optional":true,"field":"aggregateVersion"},{"type":"struct","fields":[{"type":"int32","optional":true,"field":"orderId"},{"type":"string","optional":true,"field":"orderNo"},{"type":"int32","optional":true,"field":"userId"},{"type":"double","optional":true,"field":"amount"}],"optional":true,"name":"payload.data","field":"data"}],"optional":true,"name":"payload"},"payload":{"eventId":"01JY1N5H2J3Q8A5W9M7K2D4P6R","eventType":"OrderCreated","eventVersion":1,"occurredAt":"2026-07-16T10:30:00Z","aggregateType":"ORDER","aggregateId":"100001","aggregateVersion":1,"data":{"orderId":100001,"orderNo":"ORD202607160001","userId":20001,"amount":199.0}}}',
    ),
    Shape(
        "TEXT",
        True,
        "StringConverter",
        b"100001",
        b"Struct{eventId=01JY1N5H2J3Q8A5W9M7K2D4P6R,eventType=OrderCreated,eventVersion=1,occurredAt=2026-07-16T10:30:00Z,aggregateType=ORDER,aggregateId=100001,aggregateVersion=1,data=Struct{orderId=100001,orderNo=ORD202607160001,userId=20001,amount=199.0}}",
    ),
]

EDGE_ROW = [
    Shape(
        "JSONB",
        False,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'"{\\"arr\\": [1, 2], \\"big\\": 9007199254740993, \\"dec\\": 12345678901234567.89, \\"flag\\": true, \\"note\\": \\"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 \\\\\\"q\\\\\\"\\", \\"amount\\": 0.10, \\"nested\\": {\\"a\\": null}, \\"eventId\\": \\"EDGE-ROW-0001\\", \\"emptyArr\\": [], \\"nullField\\": null}"',
    ),
    Shape(
        "JSONB",
        False,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1},"payload":"{\\"arr\\": [1, 2], \\"big\\": 9007199254740993, \\"dec\\": 12345678901234567.89, \\"flag\\": true, \\"note\\": \\"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 \\\\\\"q\\\\\\"\\", \\"amount\\": 0.10, \\"nested\\": {\\"a\\": null}, \\"eventId\\": \\"EDGE-ROW-0001\\", \\"emptyArr\\": [], \\"nullField\\": null}"}',
    ),
    Shape(
        "JSONB",
        False,
        "StringConverter",
        b"100001",
        b'{"arr": [1, 2], "big": 9007199254740993, "dec": 12345678901234567.89, "flag": true, "note": "\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 \\"q\\"", "amount": 0.10, "nested": {"a": null}, "eventId": "EDGE-ROW-0001", "emptyArr": [], "nullField": null}',
    ),
    Shape(
        "JSONB",
        True,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'{"arr":[1,2],"big":9007199254740993,"dec":1.2345678901234568E16,"flag":true,"note":"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 \\"q\\"","amount":0.1,"nested":{},"eventId":"EDGE-ROW-0001"}',
    ),
    Shape(
        "JSONB",
        True,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"arr"},{"type":"int64","optional":true,"field":"big"},{"type":"double","optional":true,"field":"dec"},{"type":"boolean","optional":true,"field":"flag"},{"type":"string","optional":true,"field":"note"},{"type":"double","optional":true,"field":"amount"},{"type":"struct","fields":[],"optional":true,"name":"payload.nested","field":"nested"},{"type":"string","optional":true,"field":"eventId"}],"optional":true,"name":"payload"},"payload":{"arr":[1,2],"big":9007199254740993,"dec":1.2345678901234568E16,"flag":true,"note":"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 \\"q\\"","amount":0.1,"nested":{},"eventId":"EDGE-ROW-0001"}}',
    ),
    Shape(
        "JSONB",
        True,
        "StringConverter",
        b"100001",
        b'Struct{arr=[1, 2],big=9007199254740993,dec=1.2345678901234568E16,flag=true,note=\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 "q",amount=0.1,nested=Struct{},eventId=EDGE-ROW-0001}',
    ),
    Shape(
        "TEXT",
        False,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'"{\\"eventId\\":\\"EDGE-ROW-0001\\",\\"note\\":\\"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \\\\u00e9 \\\\\\"q\\\\\\"\\",\\"nullField\\":null,\\"big\\":9007199254740993,\\"dec\\":12345678901234567.89,\\"amount\\":0.10,\\"flag\\":true,\\"emptyArr\\":[],\\"arr\\":[1,2],\\"nested\\":{\\"a\\":null}}"',
    ),
    Shape(
        "TEXT",
        False,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"string","optional":false},"payload":"{\\"eventId\\":\\"EDGE-ROW-0001\\",\\"note\\":\\"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \\\\u00e9 \\\\\\"q\\\\\\"\\",\\"nullField\\":null,\\"big\\":9007199254740993,\\"dec\\":12345678901234567.89,\\"amount\\":0.10,\\"flag\\":true,\\"emptyArr\\":[],\\"arr\\":[1,2],\\"nested\\":{\\"a\\":null}}"}',
    ),
    Shape(
        "TEXT",
        False,
        "StringConverter",
        b"100001",
        b'{"eventId":"EDGE-ROW-0001","note":"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \\u00e9 \\"q\\"","nullField":null,"big":9007199254740993,"dec":12345678901234567.89,"amount":0.10,"flag":true,"emptyArr":[],"arr":[1,2],"nested":{"a":null}}',
    ),
    Shape(
        "TEXT",
        True,
        "JsonConverter schemas.enable=false",
        b'"100001"',
        b'{"eventId":"EDGE-ROW-0001","note":"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 \\"q\\"","big":9007199254740993,"dec":1.2345678901234568E16,"amount":0.1,"flag":true,"arr":[1,2],"nested":{}}',
    ),
    Shape(
        "TEXT",
        True,
        "JsonConverter schemas.enable=true",
        b'{"schema":{"type":"string","optional":false},"payload":"100001"}',
        b'{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"field":"eventId"},{"type":"string","optional":true,"field":"note"},{"type":"int64","optional":true,"field":"big"},{"type":"double","optional":true,"field":"dec"},{"type":"double","optional":true,"field":"amount"},{"type":"boolean","optional":true,"field":"flag"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"arr"},{"type":"struct","fields":[],"optional":true,"name":"payload.nested","field":"nested"}],"optional":true,"name":"payload"},"payload":{"eventId":"EDGE-ROW-0001","note":"\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 \\"q\\"","big":9007199254740993,"dec":1.2345678901234568E16,"amount":0.1,"flag":true,"arr":[1,2],"nested":{}}}',
    ),
    Shape(
        "TEXT",
        True,
        "StringConverter",
        b"100001",
        b'Struct{eventId=EDGE-ROW-0001,note=\xe4\xb8\xad\xe6\x96\x87 \xc3\xbc \xc3\xa9 "q",big=9007199254740993,dec=1.2345678901234568E16,amount=0.1,flag=true,arr=[1, 2],nested=Struct{}}',
    ),
]

# header name -> (SimpleHeaderConverter, JsonConverter, JsonConverter with schemas)
HEADERS = {
    "__debezium.context.connectorLogicalName": (
        b"probe",
        b'"probe"',
        b'{"schema":{"type":"string","optional":false},"payload":"probe"}',
    ),
    "__debezium.context.taskId": (
        b"0",
        b'"0"',
        b'{"schema":{"type":"string","optional":false},"payload":"0"}',
    ),
    "__debezium.context.connectorName": (
        b"postgresql",
        b'"postgresql"',
        b'{"schema":{"type":"string","optional":false},"payload":"postgresql"}',
    ),
    "__debezium.context.runId": (
        b"01a23c39-0948-7fbb-9693-2d14e4da2a16",
        b'"01a23c39-0948-7fbb-9693-2d14e4da2a16"',
        b'{"schema":{"type":"string","optional":false},"payload":"01a23c39-0948-7fbb-9693-2d14e4da2a16"}',
    ),
    "id": (
        b"01JY1N5H2J3Q8A5W9M7K2D4P6R",
        b'"01JY1N5H2J3Q8A5W9M7K2D4P6R"',
        b'{"schema":{"type":"string","optional":false},"payload":"01JY1N5H2J3Q8A5W9M7K2D4P6R"}',
    ),
    "eventType": (
        b"OrderCreated",
        b'"OrderCreated"',
        b'{"schema":{"type":"string","optional":false},"payload":"OrderCreated"}',
    ),
}
