"""Compare what the database holds with what the events mean (a pure function)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.demo.expected import CONSUMERS, Expected
from app.demo.progress import DbState


@dataclass(frozen=True)
class Mismatch:
    """One value that differs: ``what`` is e.g. ``balance``, ``key`` the user or sku."""

    what: str
    key: str
    expected: int
    actual: int


@dataclass(frozen=True)
class Verdict:
    """The outcome of a comparison; ``ok`` when nothing differs."""

    balances: int
    stock_levels: int
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every compared value matches."""
        return not self.mismatches


def compare(expected: Expected, state: DbState, consumers: Sequence[str] = CONSUMERS) -> Verdict:
    """Every balance, stock level and count of ``state`` against ``expected``.

    A user or sku missing on one side counts as 0 there, so a row the
    consumers never wrote matches an expected 0.
    """
    mismatches = _diff("balance", expected.points, state.points)
    mismatches += _diff("reserved", expected.reserved, state.reserved)
    if state.notifications != expected.notifications:
        mismatches.append(
            Mismatch("notifications", "all", expected.notifications, state.notifications)
        )
    for consumer in consumers:
        if state.consumed_by(consumer) != expected.distinct_events:
            mismatches.append(
                Mismatch(
                    "consumed events",
                    consumer,
                    expected.distinct_events,
                    state.consumed_by(consumer),
                )
            )
    return Verdict(
        balances=len(expected.points.keys() | state.points.keys()),
        stock_levels=len(expected.reserved.keys() | state.reserved.keys()),
        mismatches=mismatches,
    )


def _diff(what: str, expected: Mapping[str, int], actual: Mapping[str, int]) -> list[Mismatch]:
    return [
        Mismatch(what, key, expected.get(key, 0), actual.get(key, 0))
        for key in sorted(expected.keys() | actual.keys())
        if expected.get(key, 0) != actual.get(key, 0)
    ]
