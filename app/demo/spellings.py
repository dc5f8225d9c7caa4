"""One workload, written the ways real producers write it.

``numbered`` turns a generated workload's ids into the numbers a Java, Go or SQL
producer takes from its database sequences (orders ``100001``..., users
``20001``..., events ``700000001``..., aggregate type ``ORDER``), kept as text: the
canonical form every spelling must come back to. A ``series`` other than 0 moves
every id (and sku) to a range of its own, so that several copies of one workload
can share a topic and a database without sharing an order, a user or a sku.
``spell`` then writes each of its events one way:

- ``strings``: every id a JSON string, the whole envelope in the value;
- ``numbers``: every id a JSON integer; per order, the aggregate id in the value
  or only in the key (raw or JSON-quoted), the aggregate type in the value or
  left to ``DEFAULT_AGGREGATE_TYPE``; every fourth amount a numeric string;
- ``debezium``: as Debezium's outbox event router emits the row (``debezium``).

Each order keeps one way of writing its key for all its events (as one producer
or connector would), so an order's events share a partition. The expected state
is the workload's: the spellings change bytes, not meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from typing import Any

import orjson

from app.demo.debezium import router_record
from app.demo.envelopes import Message, decode, encode
from app.demo.expected import expected_state
from app.demo.workload import Workload

AGGREGATE_TYPE = "ORDER"
FIRST_ORDER, FIRST_USER, FIRST_EVENT = 100_001, 20_001, 700_000_001
SERIES_STRIDE = 1_000_000_000  # between the first ids of two series
ID_FIELDS = ("orderId", "userId")


class Spelling(StrEnum):
    """How a producer writes the events on the wire."""

    STRINGS = "strings"
    NUMBERS = "numbers"
    DEBEZIUM = "debezium"


def numbered(workload: Workload, series: int = 0) -> Workload:
    """``workload`` with every id a number written as text, in order of first appearance
    (a duplicate keeps its twin's ids), and the aggregate type ``ORDER``; ids and skus of
    ``series`` (see ``in_series``)."""
    shift = series * SERIES_STRIDE
    orders = _Numbering(FIRST_ORDER + shift)
    users = _Numbering(FIRST_USER + shift)
    events = _Numbering(FIRST_EVENT + shift)
    sent = []
    for message in workload.messages:
        env = decode(message)
        data = dict(env["data"])
        data["orderId"] = orders(data["orderId"])
        data["userId"] = users(data["userId"])
        if "items" in data:
            data["items"] = [
                {**item, "sku": sku_in_series(item["sku"], series)} for item in data["items"]
            ]
        env.update(
            eventId=events(env["eventId"]),
            aggregateType=AGGREGATE_TYPE,
            aggregateId=orders(env["aggregateId"]),
            data=data,
        )
        if "correlationId" in env:
            env["correlationId"] = orders(env["correlationId"])
        if "causationId" in env:
            env["causationId"] = events(env["causationId"])
        sent.append(env)
    plans = [
        replace(
            plan,
            order_id=orders(plan.order_id),
            user_id=users(plan.user_id),
            items=tuple((sku_in_series(sku, series), qty) for sku, qty in plan.items),
        )
        for plan in workload.plans
    ]
    return Workload(
        messages=[encode(env) for env in sent],
        expected=expected_state(sent),
        plans=plans,
        duplicates=workload.duplicates,
        swapped_aggregates=workload.swapped_aggregates,
    )


def sku_in_series(sku: str, series: int) -> str:
    """``sku`` as series ``series`` names it (series 0: as it is)."""
    return f"S{series}/{sku}" if series else sku


def in_series(name: str) -> int:
    """The series of a user id or sku ``numbered`` gave out."""
    if name.isdigit():
        return int(name) // SERIES_STRIDE
    if name.startswith("S") and "/" in name:
        return int(name[1 : name.index("/")])
    return 0


def series_zero(name: str) -> str:
    """The user id or sku of series 0 that ``name`` stands for in its own series."""
    if name.isdigit():
        return str(int(name) % SERIES_STRIDE)
    return name[name.index("/") + 1 :] if name.startswith("S") and "/" in name else name


def spell(workload: Workload, spelling: Spelling) -> list[Message]:
    """The records of ``workload`` (a ``numbered`` one) written as ``spelling`` says."""
    write = _WRITERS[spelling]
    orders: dict[str, int] = {}
    messages = []
    for index, message in enumerate(workload.messages):
        env = decode(message)
        order = orders.setdefault(str(env["aggregateId"]), len(orders))
        messages.append(write(env, order, index))
    return messages


def _strings(env: dict[str, Any], order: int, index: int) -> Message:
    return encode(env)


def _numbers(env: dict[str, Any], order: int, index: int) -> Message:
    data = {**env["data"], **{name: int(env["data"][name]) for name in ID_FIELDS}}
    if index % 4 == 0 and "amount" in data:
        data["amount"] = f"{data['amount']:.2f}"
    value = {**env, "eventId": int(env["eventId"]), "data": data}
    for name in ("correlationId", "causationId"):
        if name in value:
            value[name] = int(value[name])
    aggregate = str(env["aggregateId"])
    if order % 3 == 0:
        value["aggregateId"] = int(aggregate)
    else:
        del value["aggregateId"]  # the key carries it
    if order % 2:
        del value["aggregateType"]  # DEFAULT_AGGREGATE_TYPE is ORDER
    key = orjson.dumps(aggregate) if order % 3 == 2 else aggregate.encode()
    return Message(key, orjson.dumps(value))


def _debezium(env: dict[str, Any], order: int, index: int) -> Message:
    return router_record(env, order)


_WRITERS: dict[Spelling, Callable[[dict[str, Any], int, int], Message]] = {
    Spelling.STRINGS: _strings,
    Spelling.NUMBERS: _numbers,
    Spelling.DEBEZIUM: _debezium,
}


class _Numbering:
    """Hands out consecutive numbers (as text) to the values it is shown, first come first."""

    def __init__(self, first: int) -> None:
        self._next = first
        self._given: dict[str, str] = {}

    def __call__(self, value: Any) -> str:
        key = str(value)
        if key not in self._given:
            self._given[key] = str(self._next)
            self._next += 1
        return self._given[key]
