"""The demo's verdict: stored state matches the workload's expectation, missing rows read as 0."""

from __future__ import annotations

from app.demo.expected import CONSUMERS, Expected
from app.demo.progress import DbState
from app.demo.verdict import Mismatch, compare

EXPECTED = Expected(
    points={"alice": 15, "bob": 0},
    reserved={"SKU-1": 3, "SKU-3": 0},
    notifications=9,
    distinct_events=9,
)


def stored(
    points: dict[str, int] | None = None,
    notifications: int = 9,
    consumed: dict[str, int] | None = None,
) -> DbState:
    return DbState(
        points={"alice": 15} if points is None else points,
        reserved={"SKU-1": 3, "SKU-3": 0},
        notifications=notifications,
        consumed=dict.fromkeys(CONSUMERS, 9) if consumed is None else consumed,
    )


def test_matching_state_with_a_missing_zero_row_is_ok() -> None:
    verdict = compare(EXPECTED, stored())

    assert verdict.ok
    assert (verdict.balances, verdict.stock_levels) == (2, 2)


def test_every_difference_is_reported() -> None:
    verdict = compare(
        EXPECTED,
        stored(
            points={"alice": 14, "mallory": 3},
            notifications=10,
            consumed={"points-service": 9, "inventory-service": 9},
        ),
    )

    assert not verdict.ok
    assert verdict.mismatches == [
        Mismatch("balance", "alice", 15, 14),
        Mismatch("balance", "mallory", 0, 3),
        Mismatch("notifications", "all", 9, 10),
        Mismatch("consumed events", "notification-service", 9, 0),
    ]
