"""The version gate is a pure decision: next version applies, older is stale, later parks.

Contract: ``decide(last, version)`` is ``APPLY`` for ``last + 1``, ``STALE`` for
``version <= last`` and ``PARK`` for anything further ahead.
``effective_last`` is the stored last version when there is one; for an
aggregate never applied it is ``0`` under ``FROM_ONE`` and ``version - 1``
(the event itself is the start) under ``FROM_FIRST_SEEN``.
"""

from __future__ import annotations

import pytest

from app.pipeline.gate import Gate, decide, effective_last
from app.settings import UnseenAggregatePolicy

FROM_ONE = UnseenAggregatePolicy.FROM_ONE
FROM_FIRST_SEEN = UnseenAggregatePolicy.FROM_FIRST_SEEN


@pytest.mark.parametrize(
    ("last", "version", "verdict"),
    [
        (0, 1, Gate.APPLY),
        (4, 5, Gate.APPLY),
        (0, 2, Gate.PARK),
        (4, 6, Gate.PARK),
        (4, 1000, Gate.PARK),
        (4, 4, Gate.STALE),
        (4, 3, Gate.STALE),
        (4, 1, Gate.STALE),
    ],
)
def test_decide(last: int, version: int, verdict: Gate) -> None:
    assert decide(last, version) is verdict


@pytest.mark.parametrize(
    ("stored", "version", "policy", "last"),
    [
        (None, 1, FROM_ONE, 0),
        (None, 5, FROM_ONE, 0),
        (None, 1, FROM_FIRST_SEEN, 0),
        (None, 5, FROM_FIRST_SEEN, 4),
        (3, 5, FROM_ONE, 3),
        (3, 5, FROM_FIRST_SEEN, 3),
        (3, 1, FROM_FIRST_SEEN, 3),
    ],
)
def test_effective_last(
    stored: int | None, version: int, policy: UnseenAggregatePolicy, last: int
) -> None:
    assert effective_last(stored, version, policy) == last


@pytest.mark.parametrize(
    ("policy", "verdict"), [(FROM_ONE, Gate.PARK), (FROM_FIRST_SEEN, Gate.APPLY)]
)
def test_a_first_event_at_version_five(policy: UnseenAggregatePolicy, verdict: Gate) -> None:
    assert decide(effective_last(None, 5, policy), 5) is verdict
