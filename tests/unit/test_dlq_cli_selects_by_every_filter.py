"""The DLQ command's filters select exactly the records they name.

Contract: ``--event-id``, ``--consumer``, ``--reason``, DLT positions and
``--since``/``--until`` (inclusive, on the last failure time) each keep only
matching records, and together they all must match; records come out oldest
failure first; ``--status`` and ``--limit`` apply after the database join
(``unknown`` for a record without a row), the limit keeping the oldest.
Positions read ``p:o`` (or ``outbox:<id>``), and a selection describes them as
they were written; times read ISO-8601 (naive is UTC) or an age.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dlq.dead import FailureState
from dlq.policy import DeadReason
from dlq.selection import Selection, finish, parse_moment, parse_position, prefilter
from tests.dlq_letters import T0, letter

RECORDS = [
    letter(0, event_id="a", consumer="points-service", minutes=30, original=(0, 1)),
    letter(1, event_id="b", consumer="inventory-service", minutes=10, original=(0, 2)),
    letter(2, event_id="a", consumer="inventory-service", minutes=20, original=(0, 1)),
    letter(
        0, dlt_partition=1, consumer=None, reason=DeadReason.UNDECODABLE, minutes=0, original=(1, 5)
    ),
]


def positions(selection: Selection) -> list[str]:
    return [dead.position for dead in prefilter(RECORDS, selection)]


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (Selection(), ["1:0", "0:1", "0:2", "0:0"]),
        (Selection(event_id="a"), ["0:2", "0:0"]),
        (Selection(consumer="inventory-service"), ["0:1", "0:2"]),
        (Selection(reason="undecodable"), ["1:0"]),
        (Selection(positions=frozenset({(0, 2), (1, 0)})), ["1:0", "0:2"]),
        (Selection(since=T0 + timedelta(minutes=10)), ["0:1", "0:2", "0:0"]),
        (Selection(until=T0 + timedelta(minutes=10)), ["1:0", "0:1"]),
        (Selection(since=T0 + timedelta(minutes=11), until=T0 + timedelta(minutes=29)), ["0:2"]),
        (Selection(event_id="a", consumer="inventory-service"), ["0:2"]),
        (Selection(event_id="a", reason="undecodable"), []),
    ],
)
def test_each_filter_keeps_only_its_records(selection: Selection, expected: list[str]) -> None:
    assert positions(selection) == expected


def test_status_and_limit_apply_after_the_join() -> None:
    dead = prefilter(RECORDS, Selection())
    states = {
        dead[1].failure_key: FailureState("resolved"),
        dead[2].failure_key: FailureState("dead"),
    }

    everything = finish(dead, states, Selection())
    resolved = finish(dead, states, Selection(statuses=frozenset({"resolved"})))
    unknown = finish(dead, states, Selection(statuses=frozenset({"unknown"})))
    oldest_two = finish(dead, states, Selection(limit=2))

    assert [e.status for e in everything] == ["unknown", "resolved", "dead", "unknown"]
    assert [e.dead.position for e in resolved] == ["0:1"]
    assert [e.dead.position for e in unknown] == ["1:0", "0:0"]
    assert [e.dead.position for e in oldest_two] == ["1:0", "0:1"]


def test_an_unset_selection_does_not_narrow() -> None:
    assert not Selection().narrows
    assert Selection(reason="x").narrows and Selection(limit=1).narrows


@pytest.mark.parametrize(("text", "expected"), [("0:42", (0, 42)), ("12:0", (12, 0))])
def test_positions_read_partition_colon_offset(text: str, expected: tuple[int, int]) -> None:
    assert parse_position(text) == expected


def test_a_selection_names_positions_as_the_operator_wrote_them() -> None:
    named = Selection(positions=frozenset({parse_position("outbox:999"), parse_position("3:17")}))

    assert named.describe() == "position=outbox:999, position=3:17"


@pytest.mark.parametrize("text", ["", "3", "3:", ":4", "a:1", "1:-2", "1:2:3", "0@42"])
def test_other_positions_are_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match="<dlt-partition>:<dlt-offset>"):
        parse_position(text)


NOW = datetime(2024, 5, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T10:00:00Z", datetime(2024, 5, 1, 10, 0, tzinfo=UTC)),
        ("2024-05-01T12:00:00+02:00", datetime(2024, 5, 1, 10, 0, tzinfo=UTC)),
        ("2024-05-01 10:00", datetime(2024, 5, 1, 10, 0, tzinfo=UTC)),
        ("2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
        ("90s", NOW - timedelta(seconds=90)),
        ("30m", NOW - timedelta(minutes=30)),
        ("2h", NOW - timedelta(hours=2)),
        ("1d", NOW - timedelta(days=1)),
    ],
)
def test_moments_read_iso_or_an_age(text: str, expected: datetime) -> None:
    assert parse_moment(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "2h ago", "-1d", "2024-13-01"])
def test_other_moments_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_moment(text, NOW)
