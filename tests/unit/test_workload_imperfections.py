"""The generated stream is imperfect in the requested proportions, and otherwise valid.

``duplicate_ratio`` of distinct events are sent again later with identical
bytes; ``swap_ratio`` of orders have two consecutive versions sent in swapped
order; every record is keyed by its aggregateId and reads as a valid event.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from app.demo.envelopes import decode
from app.demo.workload import Fate, Workload, generate
from schemas import model_for
from schemas.envelope import RawEnvelope

ORDERS = 1_000


@pytest.fixture(scope="module")
def workload() -> Workload:
    return generate(orders=ORDERS, users=100, skus=20, seed=5, duplicate_ratio=0.1, swap_ratio=0.05)


def test_duplicates_in_the_requested_proportion(workload: Workload) -> None:
    sends = Counter(decode(m)["eventId"] for m in workload.messages)

    assert len(sends) == workload.distinct_events
    assert workload.duplicates == round(workload.distinct_events * 0.1)
    assert sum(n - 1 for n in sends.values()) == workload.duplicates


def test_a_duplicate_is_the_same_bytes_sent_later(workload: Workload) -> None:
    first_seen: dict[bytes, int] = {}
    resent = 0
    for index, message in enumerate(workload.messages):
        if message.value in first_seen:
            assert first_seen[message.value] < index
            resent += 1
        first_seen.setdefault(message.value, index)

    assert resent == workload.duplicates


def test_swapped_versions_in_the_requested_proportion(workload: Workload) -> None:
    arrival: dict[str, list[int]] = defaultdict(list)
    for message in workload.messages:
        env = decode(message)
        versions = arrival[env["aggregateId"]]
        if env["aggregateVersion"] not in versions:
            versions.append(env["aggregateVersion"])
    out_of_order = [agg for agg, versions in arrival.items() if versions != sorted(versions)]

    assert workload.swapped_aggregates == round(ORDERS * 0.05)
    assert len(out_of_order) == workload.swapped_aggregates


def test_no_imperfections_when_ratios_are_zero() -> None:
    clean = generate(orders=200, users=10, skus=5, seed=5, duplicate_ratio=0, swap_ratio=0)

    assert clean.duplicates == 0
    assert clean.swapped_aggregates == 0
    assert len(clean.messages) == clean.distinct_events


def test_fates_in_the_requested_proportion(workload: Workload) -> None:
    fates = Counter(plan.fate for plan in workload.plans)

    assert fates[Fate.CANCELLED_UNPAID] + fates[Fate.PAID_THEN_CANCELLED] == 200
    assert fates[Fate.CANCELLED_UNPAID] == 50
    assert fates[Fate.OPEN] == 50
    assert fates[Fate.PAID] == 750


def test_every_record_is_keyed_by_aggregate_and_valid(workload: Workload) -> None:
    for message in workload.messages:
        event = RawEnvelope.model_validate_json(message.value)
        model = model_for(event.event_type, event.event_version)

        assert message.key == event.aggregate_id.encode()
        assert model is not None
        model.model_validate(event.data)


def test_rejects_ratios_outside_zero_to_one() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        generate(orders=10, duplicate_ratio=1.5)
