"""The soak's events: long per-aggregate version chains, sent as a foreign producer sends them.

Each aggregate is a customer account whose events (its orders being created, paid
and cancelled) carry versions 1, 2, 3, ... in the order they happened, so a chain
is about ``events / aggregates`` long and a gap parks everything behind it. The
stream is imperfect the way the issue asks:

- ``duplicate_ratio`` of the distinct events are sent a second time, later;
- ``swap_ratio`` of the distinct events are sent before the version preceding them;
- ``poison_ratio`` of all records are poison: bytes that are not JSON, an envelope
  whose payload fails its schema (the version after its aggregate's last one, so
  that no good event waits behind it), an ``eventVersion`` no model reads (without
  an ``aggregateVersion``). Each is sent once, and each is distinct;
- ``spaced_ratio`` of the aggregates are named as another one with a trailing space
  (``"customer-00001 "`` beside ``"customer-00001"``), and each of their events'
  ids is its twin's event id of the same version with a trailing space: distinct
  aggregates and distinct events, which a PAD SPACE collation (MariaDB's and MySQL's
  ``utf8mb4_bin``) would take for one.

The bytes are what a producer in another language writes today: the aggregate id
as the record key, the JSON text of a standard library (spaces after separators,
its own key order, a UTC offset instead of ``Z``, fields we do not read), and the
event id and type as headers as Debezium's outbox router adds them. The expected
state comes from the good events' meaning (``app.demo.expected``).
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from app.demo.envelopes import (
    cents_to_amount,
    order_cancelled_data,
    order_created_data,
    order_paid_data,
)
from app.demo.expected import Expected, expected_state

AGGREGATE_TYPE = "Customer"
SOURCE = "order-service"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
SKUS = 100
OPEN_ORDERS = 3  # a customer's orders in progress at once


class PoisonKind(StrEnum):
    """The three ways a record can be no event at all (each is a ``dlt-reason``)."""

    UNDECODABLE = "undecodable"
    INVALID_SCHEMA = "invalid-schema"
    UNSUPPORTED_VERSION = "unsupported-version"


class Record(NamedTuple):
    """One Kafka record to send: key, value and headers exactly as they go on the wire."""

    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Shape:
    """How many records, over how many aggregates, with which imperfections."""

    events: int = 100_000
    aggregates: int = 1_000
    duplicate_ratio: float = 0.10
    swap_ratio: float = 0.05
    poison_ratio: float = 0.005
    spaced_ratio: float = 0.02  # aggregates that are another's id with a trailing space
    seed: int = 17

    def __post_init__(self) -> None:
        ratios = (self.duplicate_ratio, self.swap_ratio, self.poison_ratio)
        if any(not 0.0 <= ratio < 1.0 for ratio in ratios):
            raise ValueError(f"ratios must be in [0, 1), got {ratios}")
        if not 0.0 <= self.spaced_ratio <= 0.5:
            raise ValueError(f"spaced_ratio must be in [0, 0.5], got {self.spaced_ratio}")
        if self.aggregates < 1 or self.events < 2 * self.aggregates:
            raise ValueError("need at least one aggregate and two events per aggregate")

    @property
    def spaced(self) -> int:
        """How many aggregates are another's id with a trailing space."""
        return min(round(self.aggregates * self.spaced_ratio), self.aggregates // 2)


@dataclass(frozen=True)
class Workload:
    """The records in send order, which of them are poison, and what the rest must do."""

    records: list[Record]
    poison: dict[bytes, PoisonKind]  # record value -> kind (every poison value is unique)
    expected: Expected
    duplicates: int
    swapped: int
    spaced: int = 0  # aggregates named as another with a trailing space (their events too)

    @property
    def distinct_events(self) -> int:
        """Good events that take effect (each consumer's ``consumed_event`` rows)."""
        return self.expected.distinct_events

    def poison_by_kind(self) -> dict[str, int]:
        """How many poison records of each kind."""
        return dict(Counter(kind.value for kind in self.poison.values()))


def generate(shape: Shape) -> Workload:
    """The workload of ``shape``; the same shape always gives the same bytes in the same order."""
    rng = random.Random(shape.seed)
    poison_count = round(shape.events * shape.poison_ratio)
    distinct = round((shape.events - poison_count) / (1 + shape.duplicate_ratio))
    prices = {f"SKU-{n:03d}": rng.randint(199, 9_999) for n in range(1, SKUS + 1)}
    names, twins = _names(shape.aggregates, shape.spaced)
    chains = [
        _chain(rng, name, length, prices)
        for name, length in zip(names, _split(distinct, shape.aggregates), strict=True)
    ]
    for twin, of in twins.items():
        _space_event_ids(chains[twin], chains[of])
    stream = _interleave(rng, chains)
    swapped = _swap(rng, stream, round(distinct * shape.swap_ratio))
    sent = _duplicate(rng, stream, shape.events - poison_count - len(stream))
    poison = _poison(rng, chains, poison_count)
    records = [_encode(env) for env in sent]
    for record in poison:
        records.insert(rng.randrange(len(records) + 1), record)
    kinds = {record.value: kind for record, kind in poison.items()}
    return Workload(
        records=records,
        poison=kinds,
        expected=expected_state(sent),
        duplicates=len(sent) - len(stream),
        swapped=swapped,
        spaced=len(twins),
    )


def _names(aggregates: int, spaced: int) -> tuple[list[str], dict[int, int]]:
    """The aggregates' ids, and which of them (by index) is which one's id with a trailing
    space: ``spaced`` of them, spread evenly, each the twin of the one before it."""
    names = [f"customer-{n:05d}" for n in range(1, aggregates + 1)]
    twins: dict[int, int] = {}
    if spaced:
        step = aggregates // spaced
        for index in range(1, aggregates, step):
            if len(twins) == spaced:
                break
            names[index] = names[index - 1] + " "
            twins[index] = index - 1
    return names, twins


def _space_event_ids(twin: list[dict[str, Any]], of: list[dict[str, Any]]) -> None:
    """Each event of ``twin`` takes the id of ``of``'s event of the same version, plus a
    trailing space (where ``of`` has that version); no random draw, so the rest of the
    workload is what it would be without twins."""
    for env, other in zip(twin, of, strict=False):
        env["eventId"] = other["eventId"] + " "


def _split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal chain lengths."""
    base, extra = divmod(total, parts)
    return [base + (1 if n < extra else 0) for n in range(parts)]


def _chain(
    rng: random.Random, customer: str, length: int, prices: dict[str, int]
) -> list[dict[str, Any]]:
    """``length`` events of one customer's orders, interleaved, versioned 1..length."""
    orders: list[list[tuple[str, dict[str, Any]]]] = []
    count = 0
    while count < length:
        steps = _order(rng, customer, len(orders), prices)
        orders.append(steps)
        count += len(steps)
    # Each order's steps stay in their order; up to three orders are open at a time.
    pending = [list(reversed(steps)) for steps in orders]
    merged: list[tuple[str, dict[str, Any]]] = []
    while len(merged) < length:
        open_orders = [steps for steps in pending if steps][:OPEN_ORDERS]
        merged.append(rng.choice(open_orders).pop())
    at = EPOCH + timedelta(seconds=rng.uniform(0, 60))
    chain = []
    for version, (event_type, data) in enumerate(merged, start=1):
        at += timedelta(seconds=rng.uniform(1, 600))
        chain.append(_envelope(rng, event_type, customer, version, data, at))
    return chain


def _order(
    rng: random.Random, customer: str, n: int, prices: dict[str, int]
) -> list[tuple[str, dict[str, Any]]]:
    """One order's events: created; then paid (85 %), and of those a tenth cancelled after;
    or cancelled unpaid (5 %); or left open (10 %)."""
    order_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    skus = rng.sample(sorted(prices), k=rng.randint(1, 3))
    items = [(sku, rng.randint(1, 5)) for sku in skus]
    cents = sum(prices[sku] * qty for sku, qty in items)
    order_no = f"{customer.upper()}-{n + 1:04d}"
    steps = [("OrderCreated", order_created_data(order_id, order_no, customer, cents, items))]
    fate = rng.random()
    if fate < 0.85:
        paid_at = EPOCH + timedelta(days=rng.randint(0, 30))
        steps.append(("OrderPaid", order_paid_data(order_id, customer, cents, paid_at)))
        if rng.random() < 0.10:
            steps.append(("OrderCancelled", order_cancelled_data(order_id, customer, "returned")))
    elif fate < 0.90:
        steps.append(("OrderCancelled", order_cancelled_data(order_id, customer, "unpaid")))
    return steps


def _envelope(
    rng: random.Random,
    event_type: str,
    customer: str,
    version: int | None,
    data: dict[str, Any],
    at: datetime,
    event_version: int = 1,
) -> dict[str, Any]:
    """An envelope in the order a Java producer's serializer writes its fields."""
    env: dict[str, Any] = {
        "eventId": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "eventType": event_type,
        "aggregateType": AGGREGATE_TYPE,
        "aggregateId": customer,
    }
    if version is not None:
        env["aggregateVersion"] = version
    env["eventVersion"] = event_version
    env["occurredAt"] = at.isoformat(timespec="microseconds")  # "+00:00", not "Z"
    env["source"] = SOURCE
    env["schemaRef"] = f"orders/{event_type}/v{event_version}"  # a field nobody reads
    env["data"] = data
    return env


def _encode(env: dict[str, Any]) -> Record:
    """Key = aggregate id; value = the standard library's JSON; id and type as headers."""
    return Record(
        key=str(env["aggregateId"]).encode(),
        value=json.dumps(env).encode(),
        headers=(("id", str(env["eventId"]).encode()), ("eventType", env["eventType"].encode())),
    )


def _interleave(rng: random.Random, chains: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every chain's events in one stream, each chain in version order, chains mixed."""
    slots = [(rng.random(), n) for n, chain in enumerate(chains) for _ in chain]
    slots.sort()
    cursors = [iter(chain) for chain in chains]
    return [next(cursors[n]) for _, n in slots]


def _swap(rng: random.Random, stream: list[dict[str, Any]], count: int) -> int:
    """Send ``count`` events before the version preceding them (pairs never overlap)."""
    position = {id(env): index for index, env in enumerate(stream)}
    by_version = {(env["aggregateId"], env["aggregateVersion"]): env for env in stream}
    candidates = [env for env in stream if env["aggregateVersion"] >= 2]
    rng.shuffle(candidates)
    taken: set[int] = set()
    swapped = 0
    for env in candidates:
        if swapped == count:
            break
        before = by_version[(env["aggregateId"], env["aggregateVersion"] - 1)]
        a, b = position[id(before)], position[id(env)]
        if a in taken or b in taken:
            continue
        stream[a], stream[b] = stream[b], stream[a]
        position[id(before)], position[id(env)] = b, a
        taken.update((a, b))
        swapped += 1
    return swapped


def _duplicate(
    rng: random.Random, stream: list[dict[str, Any]], count: int
) -> list[dict[str, Any]]:
    """``stream`` with ``count`` of its events sent again at a later random point."""
    slots: list[tuple[float, dict[str, Any]]] = [(float(i), env) for i, env in enumerate(stream)]
    for index in rng.sample(range(len(stream)), k=min(max(count, 0), len(stream))):
        slots.append((rng.uniform(index + 0.5, len(stream)), stream[index]))
    slots.sort(key=lambda slot: slot[0])
    return [env for _, env in slots]


def _poison(
    rng: random.Random, chains: list[list[dict[str, Any]]], count: int
) -> dict[Record, PoisonKind]:
    """``count`` poison records, the kinds in turn, each keyed by a customer."""
    kinds = list(PoisonKind)
    targets = rng.sample(range(len(chains)), k=min(count, len(chains)))
    targets += [rng.randrange(len(chains)) for _ in range(count - len(targets))]
    poison: dict[Record, PoisonKind] = {}
    for n, target in enumerate(targets):
        kind = kinds[n % len(kinds)]
        chain = chains[target]
        poison[_poison_record(rng, kind, chain, n)] = kind
    return poison


def _poison_record(
    rng: random.Random, kind: PoisonKind, chain: list[dict[str, Any]], n: int
) -> Record:
    customer = chain[0]["aggregateId"]
    at = EPOCH + timedelta(seconds=n)
    order_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if kind is PoisonKind.UNDECODABLE:
        good = _encode(_envelope(rng, "OrderPaid", customer, None, {"orderId": order_id}, at))
        # A producer cut off mid-write: the first half of a JSON text.
        return good._replace(value=good.value[: len(good.value) // 2])
    if kind is PoisonKind.INVALID_SCHEMA:
        # The version after the chain's last, so that no good event ever waits behind it.
        data = {"orderId": order_id, "userId": customer, "amount": f"{n} EUR", "paidAt": "soon"}
        return _encode(_envelope(rng, "OrderPaid", customer, len(chain) + 1, data, at))
    data = {"orderId": order_id, "userId": customer, "amount": cents_to_amount(100 + n)}
    return _encode(_envelope(rng, "OrderPaid", customer, None, data, at, event_version=7))
