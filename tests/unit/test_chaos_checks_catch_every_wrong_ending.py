"""The soak's final checks catch every way the end state can be wrong.

Contract of ``chaos.checks``: a poison record on the order topic must be on the
DLT exactly once (found by the DLT record's ``dlt-original-*`` headers); a poison
record missing there, dead-lettered twice, or a good record there, fails the
check; a record there twice is told apart by the outbox rows written for it (two:
recorded again; one: published again by a relay). Every good event must have
taken effect exactly once: an event applied twice, never, or an effect of an
unknown event fails the tally. The topic's count tells distinct events from
repeats. And the longest stall is the longest stretch in which work was pending
and no committed offset moved.
"""

from __future__ import annotations

from app.records import RawRecord
from chaos.checks import check_dead_letters, check_tally, count_topic
from chaos.watch import Stall, StallTracker
from dlq import headers

TOPIC = "orders"
GOOD = [b'{"eventId": "a"}', b'{"eventId": "b"}', b'{"eventId": "a"}']
POISON = [b"not json", b'{"eventId": "p", "eventVersion": 9}']


def record(offset: int, value: bytes, partition: int = 0) -> RawRecord:
    return RawRecord(TOPIC, partition, offset, b"k", value)


def dead_letter(original: RawRecord, reason: str = "undecodable") -> RawRecord:
    return RawRecord(
        f"{TOPIC}.DLT",
        0,
        0,
        original.key,
        original.value,
        (
            (headers.DLT_ORIGINAL_TOPIC, original.topic.encode()),
            (headers.DLT_ORIGINAL_PARTITION, str(original.partition).encode()),
            (headers.DLT_ORIGINAL_OFFSET, str(original.offset).encode()),
            (headers.DLT_REASON, reason.encode()),
        ),
    )


TOPIC_RECORDS = [record(n, value) for n, value in enumerate([*GOOD, *POISON])]
POISON_RECORDS = TOPIC_RECORDS[3:]


def test_each_poison_once_and_nothing_else_passes() -> None:
    dlt = [dead_letter(r) for r in POISON_RECORDS]
    check = check_dead_letters(TOPIC_RECORDS, dlt, set(POISON))
    assert check.ok
    assert (check.poison, check.once) == (2, 2)


def test_a_poison_record_twice_on_the_dlt_fails_and_the_outbox_says_why() -> None:
    dlt = [dead_letter(r) for r in [*POISON_RECORDS, *POISON_RECORDS]]
    # Position 3 was written to the outbox twice (recorded again); 4 once (a relay's copy).
    written = {"orders[0]@3": 2, "orders[0]@4": 1}
    check = check_dead_letters(TOPIC_RECORDS, dlt, set(POISON), written)
    assert not check.ok
    assert check.repeated == {"orders[0]@3": 2, "orders[0]@4": 2}
    assert check.once == 0
    assert check.written_twice == ["orders[0]@3"]
    # Each copy's place on the DLT, and whether the copies are the same record.
    assert check.copies_at["orders[0]@4"][-1] == "identical"
    assert len(check.copies_at["orders[0]@4"]) == 3


def test_a_poison_record_missing_from_the_dlt_fails() -> None:
    check = check_dead_letters(TOPIC_RECORDS, [dead_letter(POISON_RECORDS[1])], set(POISON))
    assert not check.ok
    assert check.missing == ["orders[0]@3"]


def test_a_good_record_on_the_dlt_fails() -> None:
    dlt = [dead_letter(r) for r in POISON_RECORDS] + [
        dead_letter(TOPIC_RECORDS[1], "retries-exhausted")
    ]
    check = check_dead_letters(TOPIC_RECORDS, dlt, set(POISON))
    assert not check.ok
    assert check.others == ["orders[0]@1 (retries-exhausted)"]


def test_the_same_poison_sent_twice_is_two_records_each_dead_lettered_once() -> None:
    again = record(9, POISON[0], partition=1)
    dlt = [dead_letter(r) for r in [*POISON_RECORDS, again]]
    check = check_dead_letters([*TOPIC_RECORDS, again], dlt, set(POISON))
    assert check.ok and check.poison == 3


def test_tally_wants_each_good_event_exactly_once() -> None:
    assert check_tally({"a": 1, "b": 1}, {"a", "b"}).ok
    twice = check_tally({"a": 2, "b": 1}, {"a", "b"})
    assert not twice.ok and twice.repeated == {"a": 2}
    lost = check_tally({"a": 1}, {"a", "b"})
    assert not lost.ok and lost.missing == 1
    stranger = check_tally({"a": 1, "b": 1, "p": 1}, {"a", "b"})
    assert not stranger.ok and stranger.strangers == 1


def test_the_topic_count_tells_repeats_from_events() -> None:
    count = count_topic(TOPIC_RECORDS, set(POISON))
    assert (count.records, count.events, count.repeats, count.poison) == (5, 2, 1, 2)


def test_the_longest_stall_is_pending_work_with_no_offset_moving() -> None:
    tracker = StallTracker()
    samples = [  # (time, committed, pending)
        (0, 0, 0),
        (1, 0, 10),  # work arrives
        (2, 5, 10),  # progress
        (3, 5, 10),
        (9, 5, 10),  # stuck since t=2: 7 s
        (10, 8, 2),  # progress
        (11, 8, 0),  # caught up: waiting for work is no stall
        (30, 8, 0),
        (31, 8, 4),
        (33, 9, 3),
    ]
    for now, done, pending in samples:
        tracker.observe(now, done, pending)
    assert tracker.longest == Stall(start=2, seconds=7)
