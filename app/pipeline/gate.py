"""The version gate: a pure decision per event. The database part lives in ``store``."""

from __future__ import annotations

from enum import StrEnum

from app.settings import UnseenAggregatePolicy


class Gate(StrEnum):
    """What the gate says about one versioned event."""

    APPLY = "apply"
    STALE = "stale"
    PARK = "park"


def effective_last(stored: int | None, version: int, policy: UnseenAggregatePolicy) -> int:
    """The last applied version to compare against; ``stored is None`` means never applied."""
    if stored is not None:
        return stored
    if policy is UnseenAggregatePolicy.FROM_FIRST_SEEN:
        return version - 1
    return 0


def decide(last: int, version: int) -> Gate:
    """``last + 1`` applies, ``<= last`` is stale, anything further ahead is parked."""
    if version == last + 1:
        return Gate.APPLY
    if version <= last:
        return Gate.STALE
    return Gate.PARK
