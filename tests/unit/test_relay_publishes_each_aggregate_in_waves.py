"""The relay sends an aggregate's rows one acknowledged wave after another, and counts
only a row's own failures as attempts.

Contract (``app.outbox.relay`` over SQLite and a fake broker): row ``k + 1`` of an
aggregate is sent only after row ``k`` was acknowledged, while different aggregates
travel in the same wave; rows taken over from a dead relay's expired lease are looked
for on the topic first, and those found there are marked published without being sent
again (rows claimed fresh are never looked for), said in one line a cycle (not one a
wave); a row the broker refuses counts one
attempt (``PENDING`` with ``next_retry_at`` and ``last_error``; ``DEAD`` at the last
attempt) and the later rows of its aggregate go back to ``PENDING`` unsent, while
other aggregates publish; a broker that cannot be reached, or whose ACLs deny the
write, is retried in place and counts nothing (a denial named, topic and permission,
until the send goes). A topic deleted while its rows wait for the broker fails their
attempts once the relay finds it missing, and the rest of the cycle settles: it does
not wait for it for ever. The producer is idempotent with ``acks=all`` unless told otherwise.
A batch the broker refused leaves aiokafka's idempotent producer out of sequence for its
partition (every later batch refused as out of order): the relay renews the producer
after such a refusal, and an out-of-order refusal counts no row's attempt, so the rows
behind the refused one publish instead of going ``DEAD`` one after another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    OutOfOrderSequenceNumber,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.db.engine import session_factory
from app.kafka_clients import KafkaClients
from app.outbox import NewEvent, add_events
from app.outbox.broker import KafkaBroker, is_row_fault
from app.outbox.message import BadRow, Message
from app.outbox.relay import Relay, RelayConfig
from app.pipeline.pause import Backoff
from tests.one_by_one import one_by_one

QUICK = Backoff(0.001, 0.001)


class FakeBroker:
    """Acknowledges at once, refuses the eventIds in ``refuse``, is unreachable ``down``
    times, denies the write (ACLs) ``denied`` times; ``sent`` keeps every accepted record
    in the order sent."""

    def __init__(self, refuse: set[str] = frozenset(), down: int = 0, denied: int = 0) -> None:  # type: ignore[assignment]
        self.refuse = refuse
        self.down = down
        self.denied = denied
        self.sent: list[str] = []
        self.tries = 0
        self.on_topic: set[str] = set()  # eventIds a dead relay got onto the topic
        self.asked: list[str] = []  # eventIds looked for on the topic

    async def already_sent(self, wanted: dict[int, tuple[Message, Any]]) -> set[int]:
        found = set()
        for row_id, (message, _) in wanted.items():
            event_id = dict(message.headers)["id"].decode()
            self.asked.append(event_id)
            if event_id in self.on_topic:
                found.add(row_id)
        return found

    async def renew(self) -> None:
        self.renewed = getattr(self, "renewed", 0) + 1

    async def missing_topics(self, topics: set[str]) -> set[str]:
        return set()

    async def send_many(self, messages: Sequence[Message]) -> list[asyncio.Future[Any] | Exception]:
        return await one_by_one(self.send, messages)

    async def send(self, message: Message) -> asyncio.Future[Any]:
        self.tries += 1
        if self.down:
            self.down -= 1
            raise KafkaConnectionError("broker gone")
        event_id = dict(message.headers)["id"].decode()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.denied:
            self.denied -= 1
            future.set_exception(TopicAuthorizationFailedError(message.topic))
        elif event_id in self.refuse:
            future.set_exception(RecordTooLargeError())
        else:
            self.sent.append(event_id)
            future.set_result(None)
        return future


class SequencedBroker(FakeBroker):
    """As aiokafka's idempotent producer: once a batch is refused (``refuse``), every later
    send is refused as out of sequence until the producer is renewed."""

    def __init__(self, refuse: set[str]) -> None:
        super().__init__(refuse)
        self.broken = False
        self.renewals = 0

    async def renew(self) -> None:
        self.broken = False
        self.renewals += 1

    async def send(self, message: Message) -> asyncio.Future[Any]:
        event_id = dict(message.headers)["id"].decode()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.broken:
            future.set_exception(OutOfOrderSequenceNumber())
        elif event_id in self.refuse:
            self.broken = True
            future.set_exception(MessageSizeTooLargeError())
        else:
            self.sent.append(event_id)
            future.set_result(None)
        return future


class SlowToRecoverBroker(SequencedBroker):
    """``SequencedBroker`` refusing each of ``refuse`` as too large, whose first send after
    a renewal finds no metadata yet (it raises)."""

    async def renew(self) -> None:
        await super().renew()
        self.down += 1

    async def send(self, message: Message) -> asyncio.Future[Any]:
        if self.down:
            self.down -= 1
            raise KafkaTimeoutError()
        if dict(message.headers)["id"].decode() in self.refuse:
            self.broken = False  # refused as too large each time, whatever came before
        return await super().send(message)


async def write(engine: AsyncEngine, *rows: tuple[str, str]) -> None:
    """``(event id, aggregate)`` pairs, in this order."""
    async with session_factory(engine)() as session, session.begin():
        await add_events(
            session,
            [NewEvent("orders", "E", "Order", agg, {}, event_id=eid) for eid, agg in rows],
        )


async def state(engine: AsyncEngine) -> dict[str, tuple[str, int, bool]]:
    t = tables.outbox_event
    async with engine.connect() as conn:
        found = await conn.execute(
            select(t.c.event_id, t.c.status, t.c.retry_count, t.c.last_error, t.c.next_retry_at)
        )
        return {
            eid: (status, count, bool(error) and (due is not None or status == "DEAD"))
            for eid, status, count, error, due in found
        }


def relay(engine: AsyncEngine, broker: FakeBroker, attempts: int = 3) -> Relay:
    config = RelayConfig(max_attempts=attempts, attempt_backoff=QUICK, pause_backoff=QUICK)
    return Relay(session_factory(engine), broker, config)


async def test_an_aggregates_rows_go_one_wave_after_another(engine: AsyncEngine) -> None:
    await write(engine, ("a1", "a"), ("b1", "b"), ("a2", "a"), ("a3", "a"), ("c1", "c"))
    broker = FakeBroker()
    assert await relay(engine, broker).run_once() == 5
    assert broker.sent == ["a1", "b1", "c1", "a2", "a3"]
    assert {s for s, _, _ in (await state(engine)).values()} == {"PUBLISHED"}


async def test_rows_a_dead_relay_got_onto_the_topic_are_not_sent_again(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "effectively_once.relay")
    await write(engine, ("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c"))
    t = tables.outbox_event
    async with engine.begin() as conn:  # a relay died holding a1, a2 and b1
        await conn.execute(
            t.update()
            .where(t.c.event_id.in_(["a1", "a2", "b1"]))
            .values(status="PROCESSING", lease_owner="dead", lease_expires_at=datetime(2020, 1, 1))
        )
    broker = FakeBroker()
    broker.on_topic = {"a1"}  # the broker took a1 before it died
    assert await relay(engine, broker).run_once() == 4
    assert sorted(broker.asked) == ["a1", "a2", "b1"]
    assert broker.sent == ["b1", "c1", "a2"]
    assert {s for s, _, _ in (await state(engine)).values()} == {"PUBLISHED"}
    said = [r.getMessage() for r in caplog.records if "taken over" in r.getMessage()]
    assert said == [
        "3 row(s) taken over from an expired lease: 1 already on the topic (not sent again), "
        "2 to send"
    ]


async def test_a_refused_row_counts_an_attempt_and_holds_back_its_aggregate(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"), ("a2", "a"), ("b1", "b"))
    broker = FakeBroker(refuse={"a1"})
    assert await relay(engine, broker).run_once() == 3
    assert broker.sent == ["b1"]  # a2 never left: it waits for a1
    assert await state(engine) == {
        "a1": ("PENDING", 1, True),
        "a2": ("PENDING", 0, False),
        "b1": ("PUBLISHED", 0, False),
    }


async def test_after_the_last_attempt_the_row_is_dead_and_the_aggregate_moves_on(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"), ("a2", "a"))
    broker = FakeBroker(refuse={"a1"})
    shipper = relay(engine, broker, attempts=2)
    for _ in range(3):
        await shipper.run_once()
        await asyncio.sleep(0.01)  # the next attempt falls due
    assert await state(engine) == {"a1": ("DEAD", 2, True), "a2": ("PUBLISHED", 0, False)}
    assert broker.sent == ["a2"]


async def test_a_refused_batch_renews_the_producer_and_the_other_rows_publish(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("big", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c"))
    broker = SequencedBroker(refuse={"big"})
    shipper = relay(engine, broker, attempts=2)
    for _ in range(4):
        await shipper.run_once()
        await asyncio.sleep(0.01)  # the next attempt falls due

    assert await state(engine) == {
        "big": ("DEAD", 2, True),
        "a2": ("PUBLISHED", 0, False),
        "b1": ("PUBLISHED", 0, False),
        "c1": ("PUBLISHED", 0, False),
    }
    assert broker.renewals >= 2  # after each refusal of "big"


async def test_a_send_that_raises_after_a_renewal_is_retried_not_fatal(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("big", "a"), ("big2", "d"), ("b1", "b"), ("c1", "c"))
    broker = SlowToRecoverBroker(refuse={"big", "big2"})
    shipper = relay(engine, broker, attempts=2)
    for _ in range(4):
        await shipper.run_once()
        await asyncio.sleep(0.01)

    assert await state(engine) == {
        "big": ("DEAD", 2, True),
        "big2": ("DEAD", 2, True),
        "b1": ("PUBLISHED", 0, False),
        "c1": ("PUBLISHED", 0, False),
    }


async def test_an_unreachable_broker_is_retried_in_place_and_counts_nothing(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"), ("a2", "a"))
    broker = FakeBroker(down=3)
    assert await relay(engine, broker, attempts=1).run_once() == 2
    assert broker.sent == ["a1", "a2"]
    assert broker.tries == 5
    assert await state(engine) == {"a1": ("PUBLISHED", 0, False), "a2": ("PUBLISHED", 0, False)}


async def test_a_write_the_acls_deny_waits_in_place_and_counts_nothing(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    await write(engine, ("a1", "a"), ("a2", "a"))
    broker = FakeBroker(denied=3)
    shipper = relay(engine, broker, attempts=1)
    assert await shipper.run_once() == 2
    assert broker.sent == ["a1", "a2"]
    assert await state(engine) == {"a1": ("PUBLISHED", 0, False), "a2": ("PUBLISHED", 0, False)}
    said = "TopicAuthorizationFailed: not allowed to write 'orders' (an ACL must allow Write)"
    waits = [r.getMessage() for r in caplog.records if said in r.getMessage()]
    assert len(waits) == 3, waits
    assert all("waits in place" in line for line in waits), waits
    assert shipper.denied == {}  # granted: said no more


class DeletingBroker(FakeBroker):
    """Knows topic ``gone`` at the relay's first look, then never finds its metadata again
    (deleted): each send to it times out, and every later look finds it missing."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0
        self.gone_tries = 0

    async def missing_topics(self, topics: set[str]) -> set[str]:
        self.looks += 1
        return set() if self.looks == 1 else topics & {"gone"}

    async def send(self, message: Message) -> asyncio.Future[Any]:
        if message.topic == "gone":
            self.gone_tries += 1
            raise KafkaTimeoutError()
        return await super().send(message)


async def test_a_topic_deleted_while_its_rows_wait_fails_them_and_the_cycle_ends(
    engine: AsyncEngine,
) -> None:
    async with session_factory(engine)() as session, session.begin():
        await add_events(
            session,
            [
                NewEvent("gone", "E", "Order", "g", {}, event_id="g1"),
                NewEvent("orders", "E", "Order", "a", {}, event_id="a1"),
            ],
        )
    broker = DeletingBroker()
    shipper = relay(engine, broker, attempts=3)
    assert await asyncio.wait_for(shipper.run_once(), 5) == 2
    assert broker.sent == ["a1"]
    assert broker.gone_tries == 1  # tried once, then found missing
    assert await state(engine) == {"g1": ("PENDING", 1, True), "a1": ("PUBLISHED", 0, False)}
    assert "gone" in shipper.missing_topics


@pytest.mark.parametrize(
    ("error", "row_fault"),
    [
        (RecordTooLargeError(), True),
        (BadRow("payload is not JSON"), True),
        (KafkaConnectionError(), False),
        (KafkaTimeoutError(), False),
        (TopicAuthorizationFailedError("orders.DLT"), False),
        (ClusterAuthorizationFailedError(), False),
        (OutOfOrderSequenceNumber(), False),
    ],
)
def test_only_a_records_own_refusal_is_its_fault(error: BaseException, row_fault: bool) -> None:
    assert is_row_fault(error) is row_fault


async def test_the_producer_is_idempotent_with_acks_all_by_default() -> None:
    broker = KafkaBroker(KafkaClients("kafka://127.0.0.1:9092"))
    assert broker.producer._txn_manager is not None  # idempotence on
    assert broker.producer._sender._acks == -1  # acks=all
    plain = KafkaBroker(KafkaClients("kafka://127.0.0.1:9092"), idempotent=False)
    assert plain.producer._txn_manager is None
    assert plain.producer._sender._acks == -1
    await broker.stop()
    await plain.stop()
