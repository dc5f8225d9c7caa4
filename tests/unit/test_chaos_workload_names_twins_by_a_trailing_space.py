"""The soak's workload has aggregates and events whose ids differ from another's only by a
trailing space, and means them as distinct.

Contract of ``chaos.workload.generate``: ``spaced_ratio`` of the aggregates are named as
another aggregate with a trailing space (``"customer-00001 "`` beside
``"customer-00001"``), as their record key and their events' ``userId``; each of their
events' ids is its twin's event id of the same version with a trailing space. Each
twin keeps a complete chain of its own, and the expected state counts every one of
these events once, each on its own aggregate and user. Everything else (the records'
count, duplicates, swaps, poison) is what the same shape gives without twins.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.demo.expected import expected_state
from chaos.profile import FULL, SHORT
from chaos.workload import Shape, Workload, generate

SHAPE = Shape(events=4_000, aggregates=40, seed=5, spaced_ratio=0.1)


@pytest.fixture(scope="module")
def workload() -> Workload:
    return generate(SHAPE)


def good(workload: Workload) -> list[dict[str, object]]:
    return [json.loads(r.value) for r in workload.records if r.value not in workload.poison]


def test_some_aggregates_are_another_with_a_trailing_space(workload: Workload) -> None:
    aggregates = {str(env["aggregateId"]) for env in good(workload)}
    spaced = {name for name in aggregates if name.endswith(" ")}
    assert workload.spaced == len(spaced) == 4
    assert len(aggregates) == SHAPE.aggregates
    assert all(name.rstrip(" ") in aggregates for name in spaced)
    for record in workload.records:
        if record.value not in workload.poison:
            env = json.loads(record.value)
            assert record.key == env["aggregateId"].encode()
            assert env["data"]["userId"] == env["aggregateId"]


def test_their_event_ids_are_their_twins_with_a_trailing_space(workload: Workload) -> None:
    by_version = {
        (str(env["aggregateId"]), env["aggregateVersion"]): str(env["eventId"])
        for env in good(workload)
    }
    spaced = [(agg, v) for agg, v in by_version if agg.endswith(" ")]
    twins = [(agg, v) for agg, v in spaced if (agg.rstrip(" "), v) in by_version]
    assert len(twins) >= len(spaced) - 4  # a twin's chain may be a version longer
    for agg, version in twins:
        assert by_version[(agg, version)] == by_version[(agg.rstrip(" "), version)] + " "
    headers = {dict(r.headers)[b"id".decode()] for r in workload.records}
    assert any(h.endswith(b" ") and h.rstrip(b" ") in headers for h in headers)


def test_each_twin_is_distinct_in_the_expected_state(workload: Workload) -> None:
    envelopes = good(workload)
    distinct = {str(env["eventId"]) for env in envelopes}
    assert workload.expected == expected_state(envelopes)
    assert workload.expected.distinct_events == len(distinct)
    assert len({event_id.rstrip(" ") for event_id in distinct}) < len(distinct)
    users = workload.expected.points
    assert any(user.endswith(" ") and user.rstrip(" ") in users for user in users)


def test_twins_change_nothing_else() -> None:
    plain = generate(replace(SHAPE, spaced_ratio=0.0))
    spaced = generate(SHAPE)
    assert plain.spaced == 0
    assert len(plain.records) == len(spaced.records)
    assert (plain.duplicates, plain.swapped) == (spaced.duplicates, spaced.swapped)
    assert plain.distinct_events == spaced.distinct_events
    assert len(plain.poison) == len(spaced.poison)


def test_the_soaks_profiles_have_twins() -> None:
    assert FULL.shape.spaced == 20 and SHORT.shape.spaced == 2


def test_at_most_half_the_aggregates_are_twins() -> None:
    with pytest.raises(ValueError, match="spaced_ratio"):
        Shape(spaced_ratio=0.6)
    half = generate(Shape(events=400, aggregates=10, spaced_ratio=0.5, seed=3))
    names = {str(env["aggregateId"]) for env in good(half)}
    assert sum(name.endswith(" ") for name in names) == 5
    assert not any(name.endswith("  ") for name in names)
