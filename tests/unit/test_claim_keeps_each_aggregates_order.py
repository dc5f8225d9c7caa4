"""The claim's plan takes, per aggregate, only a chain from its earliest unpublished row.

Contract (``app.outbox.claim``, pure parts): fed the unpublished rows in id order,
the planner takes a row only if every earlier row of its aggregate is taken too;
a row that is not claimable (``PENDING`` but not due, ``PROCESSING`` under a live
lease) holds back every later row of its aggregate, never another aggregate's; an
expired lease makes its row claimable again; the limit cuts chains, never past a
row it did not take. After locking, each chain is kept only up to its first row
that was not locked or is no longer claimable.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.outbox.claim import Planner, Seen, keep_prefixes, plan_chains

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
PAST, FUTURE = NOW - timedelta(seconds=1), NOW + timedelta(seconds=1)


def row(row_id: int, agg: str, status: str = "PENDING", due=None, lease=None) -> Seen:  # type: ignore[no-untyped-def]
    return Seen(row_id, ("Order", agg), status, due, lease)


@pytest.mark.parametrize(
    ("rows", "limit", "chains"),
    [
        pytest.param(
            [row(1, "a"), row(2, "b"), row(3, "a")], 10, {"a": [1, 3], "b": [2]}, id="all-due"
        ),
        pytest.param(
            [row(1, "a", due=FUTURE), row(2, "a"), row(3, "b")],
            10,
            {"b": [3]},
            id="not-due-holds-back",
        ),
        pytest.param([row(1, "a", due=PAST), row(2, "a")], 10, {"a": [1, 2]}, id="due-now"),
        pytest.param(
            [row(1, "a", "PROCESSING", lease=FUTURE), row(2, "a"), row(3, "b")],
            10,
            {"b": [3]},
            id="live-lease-holds-back",
        ),
        pytest.param(
            [row(1, "a", "PROCESSING", lease=PAST), row(2, "a")],
            10,
            {"a": [1, 2]},
            id="expired-lease",
        ),
        pytest.param(
            [row(1, "a"), row(2, "b"), row(3, "a"), row(4, "c")],
            2,
            {"a": [1], "b": [2]},
            id="limit",
        ),
        pytest.param(
            [row(1, "a"), row(2, "a", due=FUTURE), row(3, "a")], 10, {"a": [1]}, id="mid-chain-stop"
        ),
    ],
)
def test_plan_chains(rows: list[Seen], limit: int, chains: dict[str, list[int]]) -> None:
    planned = plan_chains(rows, NOW, limit)
    assert {agg[1]: ids for agg, ids in planned.items()} == chains


def test_pages_fed_one_after_another_keep_the_blocks_of_earlier_pages() -> None:
    planner = Planner(NOW, limit=10)
    planner.feed([row(1, "a", "PROCESSING", lease=FUTURE), row(2, "b")])
    planner.feed([row(3, "a"), row(4, "b")])
    assert planner.chains == {("Order", "b"): [2, 4]}
    assert planner.blocked == {("Order", "a")}


def test_a_limit_reached_blocks_what_comes_after() -> None:
    planner = Planner(NOW, limit=1)
    planner.feed([row(1, "a"), row(2, "b"), row(3, "a")])
    assert planner.full and planner.chains == {("Order", "a"): [1]}


@pytest.mark.parametrize(
    ("locked", "kept"),
    [
        pytest.param([1, 2, 3, 4], [1, 2, 3, 4], id="all-locked"),
        pytest.param([2, 3, 4], [4], id="head-skipped-cuts-its-chain"),
        pytest.param([1, 3, 4], [1, 4], id="middle-skipped-cuts-the-rest"),
        pytest.param([], [], id="nothing-locked"),
    ],
)
def test_keep_prefixes(locked: list[int], kept: list[int]) -> None:
    chains = {("Order", "a"): [1, 2, 3], ("Order", "b"): [4]}
    seen = {row_id: row(row_id, "a" if row_id < 4 else "b") for row_id in locked}
    assert keep_prefixes(chains, seen, NOW) == kept


def test_a_row_claimed_elsewhere_since_the_scan_cuts_its_chain() -> None:
    chains = {("Order", "a"): [1, 2]}
    locked = {1: row(1, "a", "PROCESSING", lease=FUTURE), 2: row(2, "a")}
    assert keep_prefixes(chains, locked, NOW) == []
    published = {1: row(1, "a", "PUBLISHED"), 2: row(2, "a")}
    assert keep_prefixes(chains, published, NOW) == []
