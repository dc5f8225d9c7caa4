"""A failure whose retry or DLT record the relay gave up on is listed, replayed and skipped.

Contract: the ``DEAD`` outbox row of the worker's own record reads as a dead letter named
``outbox:<id>``, its consumer taken from ``retry-consumer-group`` for a retry record and
its event and failure from the ``failed_event`` row. It shows as ``unpublished`` while
nobody decided on it (its row ``dead`` or ``retrying``), and a retry record's
``retrying`` does not make replay or skip leave it alone. ``--execute`` decides the row
from the status it holds, publishes the replay (or skip) record to the original topic for
that consumer, then deletes the ``DEAD`` row it took the place of. The table's note, the
JSON row and ``show`` say why it never arrived and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from app.failure_detail import FailureDetail, FailureDetailPolicy
from app.outbox.records import RETRY, record_row
from app.records import RawRecord
from dlq import headers as h
from dlq import render
from dlq.actions import Action, Executor, plan
from dlq.dead import UNPUBLISHED_PARTITION, DeadLetter, FailureKey, FailureState
from dlq.policy import Route
from dlq.records import Failure, OutRecord, retry_record
from dlq.selection import Entry, parse_position
from dlq.topics import retry_topic
from dlq.trip import Trip
from dlq.unpublished import of_row, with_failure
from tests.dlq_letters import BASE, ORIGINAL_HEADERS, T0

TIER = retry_topic(BASE, 1)
REFUSED = "MessageSizeTooLargeError: [Error 10] MessageSizeTooLargeError"


def unpublished_retry(outbox_id: int = 12) -> DeadLetter:
    """A retry record for ``points-service`` whose outbox row went DEAD, with its
    ``failed_event`` row joined."""
    source = RawRecord(BASE, 2, 9, b"order-1", b'{"eventId": "e-1"}', ORIGINAL_HEADERS, 1_000)
    error = FailureDetailPolicy(FailureDetail.FULL).describe(RuntimeError("boom"))
    failure = Failure("points-service", error, T0)
    out = retry_record(
        source, Trip.of(source), failure, Route(TIER, 1, due_at=T0 + timedelta(seconds=1))
    )
    row = record_row(out, RETRY, "e-1", {}, T0) | {
        "id": outbox_id,
        "retry_count": 10,
        "last_error": REFUSED,
    }
    failed = {
        "event_id": "e-1",
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": "order-1",
        "aggregate_version": 2,
        "reason": "retryable",
        "exception_type": "builtins.RuntimeError",
        "exception_message": "boom",
        "attempts": 1,
        "first_failed_at": T0.replace(tzinfo=None),  # SQLite keeps no zone
        "last_failed_at": T0,
    }
    return with_failure(of_row(row), failed)


@dataclass
class Broker:
    sent: list[tuple[OutRecord, int | None]] = field(default_factory=list)

    async def send(self, record: OutRecord, partition: int | None) -> tuple[int, int]:
        self.sent.append((record, partition))
        return partition or 0, 100


@dataclass
class Rows:
    status: dict[FailureKey, FailureState] = field(default_factory=dict)
    forgotten: list[int] = field(default_factory=list)

    async def decide(
        self, key: FailureKey, seen: FailureState, status: str, by: str, note: str | None
    ) -> bool:
        if self.status.get(key, seen).status != seen.status:
            return False
        self.status[key] = FailureState(status, by, note)
        return True

    async def undo(self, key: FailureKey, seen: FailureState, status: str) -> bool:
        self.status[key] = seen
        return True

    async def forget(self, outbox_id: int) -> None:
        self.forgotten.append(outbox_id)


def test_the_row_reads_as_a_dead_letter_named_by_its_outbox_id() -> None:
    dead = unpublished_retry()
    assert dead.position == "outbox:12" and parse_position("outbox:12") == (-1, 12)
    assert (dead.record.partition, dead.record.offset) == (UNPUBLISHED_PARTITION, 12)
    assert dead.consumer == "points-service"
    assert dead.failure_key == ("points-service", BASE, 2, 9)
    assert (dead.event_id, dead.aggregate_version, dead.attempts) == ("e-1", 2, 1)
    assert dead.first_failure_at == T0 and dead.last_failure_at == T0
    assert dead.unpublished is not None and dead.unpublished.topic == TIER


def test_it_is_unpublished_until_decided_and_not_left_alone_as_retrying() -> None:
    dead = unpublished_retry()
    for status in ("retrying", "dead", "unknown"):
        assert Entry(dead, FailureState(status)).status == "unpublished"
    for status in ("replayed", "skip-requested", "resolved", "skipped"):
        assert Entry(dead, FailureState(status)).status == status
    todo = plan([Entry(dead, FailureState("retrying"))], Action.SKIP)
    assert len(todo.act) == 1 and not todo.left_alone


async def test_a_skip_decides_publishes_for_the_consumer_then_forgets_the_row() -> None:
    dead = unpublished_retry()
    broker, rows = Broker(), Rows()
    run = Executor(Action.SKIP, broker, rows, "ops", "too large")

    summary = await run.run([Entry(dead, FailureState("retrying"))], lambda *_: None)

    assert not summary.errors
    assert rows.status[("points-service", BASE, 2, 9)] == FailureState(
        "skip-requested", "ops", "too large"
    )
    ((out, partition),) = broker.sent
    assert (out.topic, partition, out.key) == (BASE, 2, b"order-1")
    sent: dict[str, Any] = dict(out.headers)
    assert sent[h.RETRY_CONSUMER_GROUP] == b"points-service"
    assert sent[h.RETRY_ACTION] == b"skip"
    assert sent["traceparent"] == ORIGINAL_HEADERS[0][1]
    assert rows.forgotten == [12]


def test_the_operator_reads_why_and_what_to_do() -> None:
    entry = Entry(unpublished_retry(), FailureState("retrying"))
    (note,) = render.notes([entry])
    assert note.plain.startswith(f"outbox:12 (e-1 for points-service) never reached {TIER}")
    assert REFUSED in note.plain
    assert "raise its max.message.bytes, then python -m app outbox requeue 12" in note.plain
    row = render.row(entry)
    assert (row["status"], row["position"], row["dlt_partition"]) == (
        "unpublished",
        "outbox:12",
        None,
    )
    assert row["unpublished"]["outbox_id"] == 12
    assert row["unpublished"]["last_error"] == REFUSED
    assert "max.message.bytes" in row["unpublished"]["advice"]
