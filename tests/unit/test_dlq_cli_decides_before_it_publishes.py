"""``--execute`` records the decision, then publishes the replay record, at the rate asked.

Contract: for each record the ``failed_event`` row is compare-and-set from
the status the operator saw to ``replayed`` / ``skip-requested`` (with who
and why) before anything is published, so the worker's own later update
wins; a row that moved on meanwhile is not published; a failed publish puts
the row back and the run goes on with the next record. What is published is
``replay_record``: the original bytes to the original topic and partition,
for the consumer that failed it, ``retry-action: skip`` for a skip. A record
with no row, or a settled one (``--force``: its consumer will see a
duplicate), is published without touching the row. Readable poison whose row is
``skipped`` (a consumer took an earlier skip of it) is skipped for each consumer
named all the same, its row keeping ``skipped`` and taking the new decision (who
and why), once. ``--rate N`` spaces the publishes ``1/N`` s apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from aiokafka.errors import TopicAuthorizationFailedError

from dlq import headers as h
from dlq.actions import Action, Executor, plan
from dlq.dead import DeadLetter, FailureKey, FailureState
from dlq.records import OutRecord
from dlq.selection import Entry
from tests.dlq_letters import ORIGINAL_HEADERS, entry, letter


@dataclass
class Broker:
    """A fake sender that logs what it was asked, after the decisions so far."""

    log: list[str]
    sent: list[tuple[OutRecord, int | None]] = field(default_factory=list)
    fail_on: set[int] = field(default_factory=set)
    failure: Exception = field(default_factory=lambda: OSError("broker went away"))
    clock: list[float] = field(default_factory=lambda: [0.0])
    at: list[float] = field(default_factory=list)

    async def send(self, record: OutRecord, partition: int | None) -> tuple[int, int]:
        self.log.append("send")
        self.at.append(self.clock[0])
        if len(self.at) - 1 in self.fail_on:  # the n-th call (from 0) fails
            raise self.failure
        self.sent.append((record, partition))
        return partition or 0, 100 + len(self.sent)


@dataclass
class Rows:
    """A fake ``failed_event`` with compare-and-set."""

    log: list[str]
    status: dict[FailureKey, FailureState] = field(default_factory=dict)

    async def decide(
        self, key: FailureKey, seen: FailureState, status: str, by: str, note: str | None
    ) -> bool:
        self.log.append("decide")
        if self.status.get(key, seen).status != seen.status:
            return False
        self.status[key] = FailureState(status, by, note)
        return True

    async def undo(self, key: FailureKey, seen: FailureState, status: str) -> bool:
        self.log.append("undo")
        self.status[key] = seen
        return True


def executor(action: Action, rate: float | None = None) -> tuple[Executor, Broker, Rows]:
    log: list[str] = []
    broker, rows = Broker(log), Rows(log)

    async def sleep(seconds: float) -> None:
        broker.clock[0] += seconds

    run = Executor(
        action,
        broker,
        rows,
        "ops",
        "fixed in 1.2",
        rate,
        clock=lambda: broker.clock[0],
        sleep=sleep,
    )
    return run, broker, rows


def ignore(*_: object) -> None:
    pass


def key(dead: DeadLetter) -> FailureKey:
    assert dead.failure_key is not None
    return dead.failure_key


@pytest.mark.parametrize(
    ("action", "status", "skip_header"),
    [(Action.REPLAY, "replayed", None), (Action.SKIP, "skip-requested", b"skip")],
)
async def test_the_row_is_decided_then_the_replay_record_published(
    action: Action, status: str, skip_header: bytes | None
) -> None:
    dead = letter(4, dlt_partition=1, original=(2, 9))
    run, broker, rows = executor(action)

    summary = await run.run([entry(dead)], ignore)

    assert broker.log == ["decide", "send"]
    assert rows.status[key(dead)] == FailureState(status, "ops", "fixed in 1.2")
    ((out, partition),) = broker.sent
    assert (out.topic, partition, out.key) == ("orders", 2, b"order-1")
    assert out.value == dead.record.value
    sent = {name: value for name, value in out.headers}
    assert sent[h.RETRY_CONSUMER_GROUP] == b"points-service"
    assert sent[h.DLT_REPLAY_COUNT] == b"1"
    assert sent.get(h.RETRY_ACTION) == skip_header
    assert out.headers[: len(ORIGINAL_HEADERS)] == ORIGINAL_HEADERS
    assert not any(name == h.DLT_REASON for name, _ in out.headers)
    assert [e.dead.position for e, _ in summary.done] == ["1:4"] and not summary.errors


async def test_a_row_that_moved_on_is_not_published() -> None:
    dead = letter(0)
    run, broker, rows = executor(Action.REPLAY)
    rows.status[key(dead)] = FailureState("resolved")

    summary = await run.run([entry(dead, "dead")], ignore)

    assert broker.sent == []
    assert rows.status[key(dead)].status == "resolved"
    assert [message for _, message in summary.errors] == [
        "its status changed from dead meanwhile; list it again"
    ]


async def test_a_failed_publish_puts_the_row_back_and_the_run_goes_on() -> None:
    first, second = letter(0, original=(0, 1)), letter(1, original=(0, 2))
    run, broker, rows = executor(Action.REPLAY)
    broker.fail_on = {0}

    summary = await run.run([entry(first), entry(second)], ignore)

    assert broker.log == ["decide", "send", "undo", "decide", "send"]
    assert rows.status[key(first)] == FailureState("dead")
    assert rows.status[key(second)].status == "replayed"
    assert [e.dead.position for e, _ in summary.done] == ["0:1"]
    assert "broker went away" in summary.errors[0][1]


async def test_a_publish_the_acls_deny_names_the_permission() -> None:
    run, broker, _ = executor(Action.REPLAY)
    broker.fail_on = {0}
    broker.failure = TopicAuthorizationFailedError("orders")

    summary = await run.run([entry(letter(0, original=(0, 1)))], ignore)

    assert "not allowed to write 'orders' (an ACL must allow Write)" in summary.errors[0][1]


@pytest.mark.parametrize("status", ["unknown", "resolved", "skipped"])
async def test_without_a_row_or_when_settled_it_publishes_without_a_decision(status: str) -> None:
    run, broker, rows = executor(Action.REPLAY)

    summary = await run.run([entry(letter(0), status)], ignore)

    assert broker.log == ["send"] and len(summary.done) == 1
    assert rows.status == {}


async def test_a_later_skip_of_poison_skipped_already_keeps_its_row_skipped() -> None:
    poison = letter(3, consumer=None, original=(0, 3), readable=True)
    run, broker, rows = executor(Action.SKIP)
    rows.status[key(poison)] = FailureState("skipped", "night-shift", "garbled upstream")
    todo = plan([entry(poison, "skipped")], Action.SKIP, for_consumers=("tally", "probe"))

    summary = await run.run(todo.act, ignore)

    assert not todo.left_alone
    assert broker.log == ["decide", "send", "send"] and len(summary.done) == 2
    assert rows.status == {key(poison): FailureState("skipped", "ops", "fixed in 1.2")}
    assert [dict(out.headers)[h.RETRY_CONSUMER_GROUP] for out, _ in broker.sent] == [
        b"probe",
        b"tally",
    ]


async def test_rate_spaces_the_publishes() -> None:
    entries: list[Entry] = [entry(letter(n, original=(0, n))) for n in range(5)]
    run, broker, _ = executor(Action.REPLAY, rate=4)
    heard: list[str] = []

    await run.run(entries, lambda e, sent, error: heard.append(e.dead.position))

    assert broker.at == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert heard == ["0:0", "0:1", "0:2", "0:3", "0:4"]
