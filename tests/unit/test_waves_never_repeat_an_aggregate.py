"""``apply.waves`` layers an application plan into waves that never repeat an aggregate.

Contract: wave ``k`` holds each aggregate's ``k``-th event of the plan, in plan
order; together the waves hold every event of the plan exactly once; no wave
holds two events of one aggregate (``(aggregateType, aggregateId)``, versioned
or not), so a batch handler called once per wave and event type sees at most
one event per aggregate, and an aggregate's events fall in successive waves in
plan order. The number of waves is the largest number of events any one
aggregate has in the plan, however the aggregates interleave. Pure: no
database, no clock.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from app.pipeline.apply import waves
from app.pipeline.decode import Decoded, decode
from app.records import RawRecord

_offsets = iter(range(1_000_000))


def item(aggregate_id: str, version: int | None = None, aggregate_type: str = "Order") -> Decoded:
    """A decoded OrderPaid of ``aggregate_id``; its eventId names aggregate and version."""
    env: dict[str, Any] = {
        "eventId": f"{aggregate_type}:{aggregate_id}:{version}:{next(_offsets)}",
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
        "occurredAt": "2024-05-01T12:00:00Z",
        "data": {
            "orderId": aggregate_id,
            "userId": "u",
            "amount": 1,
            "paidAt": "2024-05-01T12:00:00Z",
        },
    }
    if version is not None:
        env["aggregateVersion"] = version
    decoded = decode(RawRecord("orders", 0, 0, None, orjson.dumps(env)))
    assert isinstance(decoded, Decoded)
    return decoded


def shape(result: list[list[Decoded]]) -> list[list[tuple[str, int | None]]]:
    return [[(i.event.aggregate_id, i.event.aggregate_version) for i in wave] for wave in result]


def test_an_empty_plan_has_no_waves() -> None:
    assert waves([]) == []


def test_distinct_aggregates_make_one_wave_in_plan_order() -> None:
    plan = [item("c", 1), item("a", 4), item("b", 2)]

    assert waves(plan) == [plan]


def test_an_aggregates_kth_event_lands_in_the_kth_wave() -> None:
    plan = [item("a", 1), item("b", 1), item("a", 2), item("c", 1), item("a", 3), item("c", 2)]

    assert shape(waves(plan)) == [
        [("a", 1), ("b", 1), ("c", 1)],
        [("a", 2), ("c", 2)],
        [("a", 3)],
    ]


def test_consecutive_events_of_many_aggregates_need_only_as_many_waves_as_versions() -> None:
    plan = [item(name, v) for name in "abcdefghij" for v in (1, 2, 3)]

    result = waves(plan)

    assert len(result) == 3
    assert all(len(wave) == 10 for wave in result)


def test_one_aggregate_alone_gets_one_wave_per_event() -> None:
    plan = [item("a", v) for v in (1, 2, 3)]

    assert shape(waves(plan)) == [[("a", 1)], [("a", 2)], [("a", 3)]]


def test_unversioned_events_of_one_aggregate_are_kept_apart_too() -> None:
    plan = [item("a"), item("b"), item("a")]

    assert shape(waves(plan)) == [[("a", None), ("b", None)], [("a", None)]]


def test_the_same_id_in_two_aggregate_types_is_two_aggregates() -> None:
    plan = [item("1", 1, aggregate_type="Order"), item("1", 1, aggregate_type="User")]

    assert waves(plan) == [plan]


@pytest.mark.parametrize("seed", range(20))
def test_random_plans_keep_every_promise(seed: int) -> None:
    rng = random.Random(seed)
    next_version: dict[str, int] = {}
    plan = []
    for _ in range(rng.randint(1, 60)):
        aggregate = rng.choice("abcdefg")
        next_version[aggregate] = next_version.get(aggregate, 0) + 1
        plan.append(item(aggregate, next_version[aggregate]))

    result = waves(plan)

    flat = [i for wave in result for i in wave]
    assert sorted(map(id, flat)) == sorted(map(id, plan))
    position = {id(i): n for n, i in enumerate(plan)}
    for wave in result:
        assert len({i.event.aggregate for i in wave}) == len(wave)
        assert [position[id(i)] for i in wave] == sorted(position[id(i)] for i in wave)
    for aggregate in set(next_version):
        mine = [i for i in plan if i.event.aggregate_id == aggregate]
        waves_of = [n for n, wave in enumerate(result) for i in wave if i in mine]
        assert waves_of == list(range(len(mine)))
    assert len(result) == max(next_version.values())
