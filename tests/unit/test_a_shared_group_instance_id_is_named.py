"""A static membership another worker shares is named, apart from a session that expired.

Contract: ``Membership`` counts aiokafka's heartbeats that found this worker's member id
unknown; three within a minute (two workers with one ``GROUP_INSTANCE_ID`` take it from
each other every few seconds) fail the ``membership`` check, naming the setting and its
value, and log one ERROR; one now and then (a session that expired once) does not, and the
check passes again once they stop. They are counted whatever the log level; a record goes
on to the handlers only at the level the rest of aiokafka logs at.
"""

from __future__ import annotations

import logging

import pytest

from app.runtime.membership import TAKEN_OVER_TIMES, WINDOW_SECONDS, Membership

UNKNOWN = "Heartbeat failed: local member_id was not recognized; resetting and re-joining group"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def heartbeat(membership: Membership, message: str = UNKNOWN) -> bool:
    record = logging.LogRecord("aiokafka.consumer.group_coordinator", 30, "", 0, message, (), None)
    return membership.filter(record)


def test_a_membership_taken_over_again_and_again_fails_the_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    membership = Membership("orders-0", clock)
    caplog.set_level(logging.ERROR, "effectively_once.worker")
    for _ in range(TAKEN_OVER_TIMES):
        assert heartbeat(membership)
        clock.now += 3
    check = membership.check()

    assert (check.name, check.ok) == ("membership", False)
    assert "GROUP_INSTANCE_ID=orders-0" in check.detail
    assert "another worker runs with the same GROUP_INSTANCE_ID" in check.detail
    assert [r.getMessage() for r in caplog.records] == [check.detail]

    clock.now += WINDOW_SECONDS
    assert membership.check().ok


def test_a_session_that_expired_now_and_then_is_no_take_over() -> None:
    clock = Clock()
    membership = Membership("orders-0", clock)
    for _ in range(TAKEN_OVER_TIMES + 2):
        heartbeat(membership)
        heartbeat(membership, "Heartbeat failed for group x: generation id is not current.")
        clock.now += WINDOW_SECONDS / (TAKEN_OVER_TIMES - 1) + 1
        assert membership.check().ok


def test_counted_whatever_the_log_level_and_shown_only_at_it() -> None:
    aiokafka = logging.getLogger("aiokafka")
    before = aiokafka.level
    aiokafka.setLevel(logging.ERROR)  # LOG_LEVEL=ERROR, say
    try:
        clock = Clock()
        membership = Membership("orders-0", clock).watch()
        coordinator = logging.getLogger("aiokafka.consumer.group_coordinator")
        shown = []
        for _ in range(TAKEN_OVER_TIMES):
            shown.append(
                coordinator.filter(
                    coordinator.makeRecord(
                        coordinator.name, logging.WARNING, "", 0, UNKNOWN, (), None
                    )
                )
            )
        assert coordinator.isEnabledFor(logging.WARNING)
        assert shown == [False] * TAKEN_OVER_TIMES
        assert not membership.check().ok
    finally:
        aiokafka.setLevel(before)
        logging.getLogger("aiokafka.consumer.group_coordinator").removeFilter(membership)
