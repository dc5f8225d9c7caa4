"""The soak's workload has the size and the imperfections it claims, and its expected
state comes from the good events only.

Contract of ``chaos.workload.generate``: exactly ``events`` records; the poison
share of them poison (each distinct, each kind in turn, none of them a good event,
a versioned one always after its aggregate's last version); the duplicate share of
the distinct events sent twice, the later copy after the first; the swap share sent
before the version preceding them; every aggregate's versions 1..n present with no
gap, so nothing can stay parked; records keyed by their aggregate, the event id and
type in headers; the same shape always gives the same bytes.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from app.demo.expected import expected_state
from chaos.workload import PoisonKind, Shape, Workload, generate

SHAPE = Shape(events=4_000, aggregates=40, seed=5)


@pytest.fixture(scope="module")
def workload() -> Workload:
    return generate(SHAPE)


def good_envelopes(workload: Workload) -> list[dict[str, object]]:
    return [json.loads(r.value) for r in workload.records if r.value not in workload.poison]


def test_sizes_and_shares(workload: Workload) -> None:
    assert len(workload.records) == 4_000
    assert len(workload.poison) == 20  # 0.5 %
    distinct = workload.distinct_events
    assert workload.duplicates == 4_000 - 20 - distinct
    assert workload.duplicates == pytest.approx(0.10 * distinct, abs=1)
    assert workload.swapped == round(0.05 * distinct)
    assert Counter(workload.poison.values()) == {
        PoisonKind.UNDECODABLE: 7,
        PoisonKind.INVALID_SCHEMA: 7,
        PoisonKind.UNSUPPORTED_VERSION: 6,
    }
    assert len({r.value for r in workload.records if r.value in workload.poison}) == 20


def test_every_chain_is_complete_and_long(workload: Workload) -> None:
    versions: dict[str, set[int]] = defaultdict(set)
    for env in good_envelopes(workload):
        versions[str(env["aggregateId"])].add(int(env["aggregateVersion"]))  # type: ignore[call-overload]
    assert len(versions) == SHAPE.aggregates
    assert all(v == set(range(1, len(v) + 1)) for v in versions.values())
    assert min(map(len, versions.values())) >= 80  # about events / aggregates each


def test_duplicates_come_later_and_swaps_come_early(workload: Workload) -> None:
    first_at: dict[str, int] = {}
    repeats = 0
    arrival: dict[tuple[str, int], int] = {}
    for n, env in enumerate(good_envelopes(workload)):
        event_id = str(env["eventId"])
        if event_id in first_at:
            repeats += 1
            continue
        first_at[event_id] = n
        arrival[(str(env["aggregateId"]), int(env["aggregateVersion"]))] = n  # type: ignore[call-overload]
    early = sum(1 for (agg, v), n in arrival.items() if v > 1 and n < arrival[(agg, v - 1)])
    assert repeats == workload.duplicates
    assert early == workload.swapped


def test_expected_state_is_the_good_events_meaning(workload: Workload) -> None:
    assert workload.expected == expected_state(good_envelopes(workload))
    distinct = {env["eventId"] for env in good_envelopes(workload)}
    assert workload.expected.distinct_events == len(distinct)


def test_poison_never_holds_up_a_good_event(workload: Workload) -> None:
    last = Counter[str]()
    for env in good_envelopes(workload):
        agg = str(env["aggregateId"])
        last[agg] = max(last[agg], int(env["aggregateVersion"]))  # type: ignore[call-overload]
    for value, kind in workload.poison.items():
        if kind is PoisonKind.UNDECODABLE:
            with pytest.raises(ValueError):
                json.loads(value)
            continue
        env = json.loads(value)
        version = env.get("aggregateVersion")
        assert version is None or version == last[env["aggregateId"]] + 1


def test_records_are_keyed_and_headed_as_a_foreign_producer_sends_them(
    workload: Workload,
) -> None:
    for record in workload.records[:200]:
        if record.value in workload.poison:
            continue
        env = json.loads(record.value)
        assert record.key == env["aggregateId"].encode()
        assert dict(record.headers) == {
            "id": env["eventId"].encode(),
            "eventType": env["eventType"].encode(),
        }
        assert b'", "' in record.value  # the standard library's separators, not orjson's
        assert env["occurredAt"].endswith("+00:00")


def test_the_same_shape_gives_the_same_bytes() -> None:
    small = Shape(events=600, aggregates=10, seed=9)
    assert generate(small).records == generate(small).records
    assert generate(small).records != generate(Shape(events=600, aggregates=10, seed=10)).records
