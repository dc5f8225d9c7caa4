"""Replay and skip act only on records that need it.

Contract: of the selected records, ``resolved``/``skipped`` (settled) and
``retrying`` (a replay already under way) ones are left alone unless
``force``; of several DLT copies of one failure (it died again after a replay) only
the newest is acted on; ``skip`` refuses poison whose envelope was read unless
consumers are named to skip it for, settles (marks ``skipped``, publishing nothing)
poison without one, which holds back no version, while ``replay`` takes both. What is
acted on comes in the original topic's order, and no record is lost from the count.
"""

from __future__ import annotations

import pytest

from dlq.actions import Action, plan
from dlq.policy import DeadReason
from tests.dlq_letters import entry, letter


def positions(entries: list) -> list[str]:
    return [e.dead.position for e in entries]


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("status", ["resolved", "skipped", "retrying"])
def test_settled_and_in_flight_records_are_left_alone_unless_forced(
    action: Action, status: str
) -> None:
    entries = [entry(letter(0, original=(0, 1)), status), entry(letter(1, original=(0, 2)))]

    normal = plan(entries, action)
    forced = plan(entries, action, force=True)

    assert positions(normal.act) == ["0:1"]
    assert positions(normal.left_alone) == ["0:0"]
    assert positions(forced.act) == ["0:0", "0:1"]
    assert normal.selected == forced.selected == 2


@pytest.mark.parametrize("status", ["dead", "replayed", "skip-requested", "unknown"])
def test_dead_and_decided_records_are_acted_on(status: str) -> None:
    assert positions(plan([entry(letter(3), status)], Action.REPLAY).act) == ["0:3"]


def test_only_the_newest_copy_of_a_failure_is_acted_on() -> None:
    first = entry(letter(0, minutes=0, replay_count=0))
    second = entry(letter(5, minutes=9, replay_count=1))
    other_consumer = entry(letter(6, consumer="inventory-service", minutes=1))

    todo = plan([second, first, other_consumer], Action.REPLAY)

    assert positions(todo.act) == ["0:6", "0:5"]
    assert positions(todo.older_copies) == ["0:0"]
    assert todo.selected == 3


def test_skip_refuses_readable_poison_settles_unreadable_poison_and_replay_takes_both() -> None:
    readable = entry(
        letter(2, consumer=None, reason=DeadReason.INVALID_SCHEMA, original=(0, 3), readable=True)
    )
    unreadable = entry(letter(3, consumer=None, reason=DeadReason.UNDECODABLE, original=(0, 2)))
    paid = entry(letter(1, original=(0, 4)))

    skipped = plan([readable, unreadable, paid], Action.SKIP)
    replayed = plan([readable, unreadable, paid], Action.REPLAY)

    assert positions(skipped.refused) == ["0:2"] and positions(skipped.act) == ["0:1"]
    assert positions(skipped.settle) == ["0:3"] and skipped.selected == 3
    assert positions(replayed.act) == ["0:3", "0:2", "0:1"]
    assert not (replayed.refused or replayed.settle)


def test_unreadable_poison_settled_already_is_left_alone_unless_forced() -> None:
    unreadable = entry(letter(3, consumer=None, reason=DeadReason.UNDECODABLE), "skipped")

    assert positions(plan([unreadable], Action.SKIP).left_alone) == ["0:3"]
    assert positions(plan([unreadable], Action.SKIP, force=True).settle) == ["0:3"]


def test_records_are_acted_on_in_the_original_topics_order() -> None:
    entries = [
        entry(letter(0, original=(1, 9), minutes=0)),
        entry(letter(1, original=(0, 8), minutes=1)),
        entry(letter(2, original=(0, 3), minutes=2, event_id="e-2")),
    ]

    assert positions(plan(entries, Action.REPLAY).act) == ["0:2", "0:1", "0:0"]
