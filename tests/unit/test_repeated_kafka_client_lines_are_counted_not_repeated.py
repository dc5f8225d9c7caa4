"""aiokafka's repeated lines: one per message each interval, the next one counting the rest.

Contract: ``Repeats`` passes the first record of each (logger, format string), leaves out
the same message for ``EVERY_SECONDS`` (whatever its arguments), and the first one after
says how many it left out; another message passes at once; an INFO record always passes
(each rebalance logs its assignment in the same words, and the tests and operators read
it). ``quiet_repeats`` puts one on
every aiokafka logger, once. (A worker whose broker was down logged about 60 of them a
second.)
"""

from __future__ import annotations

import logging

import pytest

from app.logging_repeats import Repeats, quiet_repeats


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(
    msg: str, *args: object, name: str = "aiokafka.conn", level: int = logging.ERROR
) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_a_repeat_is_left_out_and_counted_by_the_next_that_passes() -> None:
    clock = Clock()
    repeats = Repeats(every=10.0, clock=clock)
    unable = "Unable connect to node with id %s: %s"

    assert repeats.filter(record(unable, 1, "refused"))
    clock.now = 0.5
    assert not repeats.filter(record(unable, 1, "refused"))
    assert not repeats.filter(record(unable, 2, "reset"))
    assert repeats.filter(record("Unable to update metadata from %s", [1]))
    assert repeats.filter(record(unable, 1, "refused", name="aiokafka.consumer.fetcher"))

    clock.now = 10.5
    passed = record(unable, 1, "refused")
    assert repeats.filter(passed)
    assert passed.getMessage() == (
        "Unable connect to node with id 1: refused (2 more like it left out in 10s)"
    )
    clock.now = 11.0
    assert not repeats.filter(record(unable, 1, "refused"))


def test_info_records_always_pass() -> None:
    repeats = Repeats(every=10.0, clock=Clock())
    assigned = "Setting newly assigned partitions %s for group %s"

    for partitions in ({0, 1, 2, 3}, {2, 3}):
        assert repeats.filter(record(assigned, partitions, "g", level=logging.INFO))


def test_every_aiokafka_logger_gets_one_filter_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiokafka.conn  # noqa: F401  (its logger exists)

    names = ["aiokafka", "aiokafka.conn"]
    for name in names:
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "filters", [])

    quiet_repeats()
    quiet_repeats()

    for name in names:
        assert [type(f) for f in logging.getLogger(name).filters] == [Repeats]
