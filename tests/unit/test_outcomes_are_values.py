"""Outcomes are immutable values that compare by content, so metrics and tests assert on them.

Contract: each constructor (``Applied``, ``Duplicate``, ``Stale``, ``Parked``,
``Skipped``) builds an ``Outcome`` of its ``Kind`` for one consumer and eventId
(with a detail where one applies); two outcomes with the same content are
equal; an outcome cannot be changed. ``Kind`` values are the lower-case names
used as metric labels; a failure's outcome is where it was routed
(``retried``, ``dead-lettered``), there is no ``failed``.
"""

from __future__ import annotations

import pytest

from app.pipeline.outcomes import Applied, Duplicate, Kind, Outcome, Parked, Skipped, Stale


def test_each_constructor_builds_its_kind() -> None:
    assert Applied("points", "e1", "OrderPaid") == Outcome(
        Kind.APPLIED, "points", "e1", "OrderPaid"
    )
    assert Duplicate("points", "e1", "OrderPaid") == Outcome(
        Kind.DUPLICATE, "points", "e1", "OrderPaid"
    )
    assert Stale("points", "e1", "OrderPaid", "v1 <= 2") == Outcome(
        Kind.STALE, "points", "e1", "OrderPaid", "v1 <= 2"
    )
    assert Parked("points", "e1", "OrderPaid", "waiting for version 2") == Outcome(
        Kind.PARKED, "points", "e1", "OrderPaid", "waiting for version 2"
    )
    assert Skipped("points", "e1", "OrderPaid") == Outcome(
        Kind.SKIPPED, "points", "e1", "OrderPaid"
    )


def test_outcomes_with_the_same_content_are_equal_and_hashable() -> None:
    first, second = Applied("points", "e1", "OrderPaid"), Applied("points", "e1", "OrderPaid")

    assert first == second
    assert len({first, second, Applied("inventory", "e1", "OrderPaid")}) == 2
    assert first.detail == ""


def test_an_outcome_cannot_be_changed() -> None:
    outcome = Applied("points", "e1", "OrderPaid")

    with pytest.raises(AttributeError):
        outcome.kind = Kind.STALE  # type: ignore[misc]


def test_kind_values_are_metric_label_names() -> None:
    assert [k.value for k in Kind] == [
        "applied",
        "duplicate",
        "stale",
        "parked",
        "retried",
        "dead-lettered",
        "skipped",
        "poison",
    ]
    assert f"{Kind.PARKED}" == "parked"
