"""The DLQ command reads every header the pipeline writes on a dead-letter record.

Contract: a record built by ``dlq.records.dead_letter_record`` reads back as
the consumer, original topic/partition/offset, reason, exception, attempts,
first and last failure times, event id/type, aggregate and replay count it
was written with; it is named ``partition:offset`` in the DLT and points at
the ``failed_event`` row (consumer ``''`` for poison). A record on the DLT
without those headers (or with garbage in them) reads as empty fields, never
an exception, and points at no row.
"""

from __future__ import annotations

from datetime import timedelta

from app.records import RawRecord
from dlq import headers as h
from dlq.dead import DeadLetter
from dlq.policy import DeadReason
from tests.dlq_letters import DLT, T0, letter


def test_a_dead_letter_reads_back_as_written() -> None:
    dead = letter(4, dlt_partition=1, original=(2, 9), minutes=5, replay_count=1)

    assert dead.position == "1:4"
    assert dead.consumer == "points-service"
    assert (dead.original_topic, dead.original_partition, dead.original_offset) == ("orders", 2, 9)
    assert dead.reason == "retries-exhausted"
    assert dead.exception_type == "builtins.RuntimeError"
    assert dead.exception_message == "boom"
    assert dead.attempts == 3
    assert dead.last_failure_at == T0 + timedelta(minutes=5)
    assert dead.first_failure_at == T0 + timedelta(minutes=5)
    assert (dead.event_id, dead.event_type) == ("e-1", "OrderPaid")
    assert (dead.aggregate_type, dead.aggregate_id) == ("Order", "order-1")
    assert dead.aggregate_version == 2
    assert dead.replay_count == 1
    assert not dead.is_poison
    assert dead.failure_key == ("points-service", "orders", 2, 9)
    assert dead.record.header("traceparent") == b"00-abc-01"


def test_poison_has_no_consumer_and_points_at_the_empty_consumer_row() -> None:
    dead = letter(0, consumer=None, reason=DeadReason.UNDECODABLE, attempts=1)

    assert dead.is_poison
    assert dead.consumer is None
    assert dead.event_id is None and dead.aggregate_id is None
    assert dead.failure_key == ("", "orders", 0, 7)
    assert dead.reason == "undecodable"


def test_a_foreign_record_reads_as_empty_fields() -> None:
    bare = DeadLetter.of(RawRecord(DLT, 0, 3, None, b"hello"))
    garbled = DeadLetter.of(
        RawRecord(
            DLT,
            0,
            4,
            None,
            b"x",
            (
                (h.DLT_ORIGINAL_OFFSET, b"seven"),
                (h.DLT_LAST_FAILURE_AT, b"yesterday"),
                (h.DLT_ATTEMPTS, b"\xff"),
            ),
        )
    )

    for dead in (bare, garbled):
        assert dead.failure_key is None
        assert dead.attempts is None and dead.last_failure_at is None
        assert dead.reason == "" and dead.replay_count == 0
