"""notification-service: one row per order event, sent only after the transaction commits.

Contract: each of ``OrderCreated``, ``OrderPaid`` and ``OrderCancelled``
writes one ``notification`` row (its kind, order and user) and hands the send
to ``ctx.after_commit``; the handler itself never calls the sender. The same
eventId written twice leaves one row and one send. ``set_sender`` swaps the
sender and returns the previous one; the default ``LogSender`` logs. The
handlers are batch handlers: a list of events in one call writes one row and
registers one send per event. They run on a real database created by the
migrations (SQLite here; PostgreSQL and MariaDB in
``tests/integration/test_example_handlers_on_each_database.py``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

import handlers
from app.context import AfterCommit, HandlerContext
from app.registry import HandlerFn, default_registry
from handlers.notification import (
    CONSUMER,
    LogSender,
    Notification,
    Sender,
    order_cancelled,
    order_placed,
    payment_received,
    set_sender,
)
from handlers.tables import notification
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderCreated, OrderItem, OrderPaid

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


class RecordingSender:
    """A sender that keeps what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[Notification] = []

    async def send(self, notification: Notification) -> None:
        self.sent.append(notification)


class RecordingContext(HandlerContext):
    """A handler context that keeps its after-commit callbacks for the test to run."""

    def __init__(self, session: AsyncSession) -> None:
        super().__init__(session=session, consumer=CONSUMER)
        self.pending: list[AfterCommit] = []

    def after_commit(self, callback: AfterCommit) -> None:
        self.pending.append(callback)


@pytest.fixture
def sender() -> Iterator[RecordingSender]:
    """The sender for the test; the previous one is put back afterwards."""
    recording = RecordingSender()
    previous = set_sender(recording)
    yield recording
    set_sender(previous)


def envelope(data: BaseModel, version: int, event_id: str | None = None) -> Envelope[Any]:
    """An Order event around ``data``."""
    return Envelope[Any](
        event_id=event_id or str(uuid.uuid4()),
        event_type=type(data).__name__,
        event_version=1,
        aggregate_type="Order",
        aggregate_id=data.order_id,  # type: ignore[attr-defined]
        aggregate_version=version,
        occurred_at=NOW,
        data=data,
    )


CREATED = OrderCreated(
    order_id="o-1",
    order_no="no-1",
    user_id="u-1",
    amount=Decimal("12.5"),
    items=[OrderItem(sku="A", qty=1)],
)
PAID = OrderPaid(order_id="o-1", user_id="u-1", amount=Decimal("12.5"), paid_at=NOW)
CANCELLED = OrderCancelled(order_id="o-1", user_id="u-1", reason="changed mind")


async def apply(session: AsyncSession, fn: HandlerFn, *events: Envelope[Any]) -> RecordingContext:
    """Run one batch handler on ``events`` in one call and commit, leaving its callbacks pending."""
    ctx = RecordingContext(session)
    await fn(list(events), ctx)
    await session.commit()
    return ctx


async def test_each_order_event_writes_one_row_of_its_kind(
    session: AsyncSession, sender: RecordingSender
) -> None:
    events = [envelope(CREATED, 1), envelope(PAID, 2), envelope(CANCELLED, 3)]
    for fn, event in zip((order_placed, payment_received, order_cancelled), events, strict=True):
        await apply(session, fn, event)

    rows = (await session.execute(select(notification).order_by(notification.c.id))).all()
    assert [(r.event_id, r.order_id, r.user_id, r.kind) for r in rows] == [
        (events[0].event_id, "o-1", "u-1", "order_placed"),
        (events[1].event_id, "o-1", "u-1", "payment_received"),
        (events[2].event_id, "o-1", "u-1", "order_cancelled"),
    ]
    assert all(r.created_at is not None for r in rows)


async def test_the_send_waits_for_the_commit(
    session: AsyncSession, sender: RecordingSender
) -> None:
    event = envelope(PAID, 2)

    ctx = await apply(session, payment_received, event)
    assert sender.sent == []
    assert len(ctx.pending) == 1

    for callback in ctx.pending:
        await callback()
    assert [(n.event_id, n.order_id, n.user_id, n.kind) for n in sender.sent] == [
        (event.event_id, "o-1", "u-1", "payment_received")
    ]


async def test_a_rolled_back_notification_leaves_no_row_and_nothing_sent(
    session: AsyncSession, sender: RecordingSender
) -> None:
    ctx = RecordingContext(session)
    await order_placed([envelope(CREATED, 1)], ctx)
    await session.rollback()  # the framework drops ctx's callbacks with the transaction

    assert (await session.execute(select(notification))).all() == []
    assert sender.sent == []


async def test_the_same_event_twice_writes_and_sends_once(
    session: AsyncSession, sender: RecordingSender
) -> None:
    event = envelope(CREATED, 1)

    first = await apply(session, order_placed, event)
    second = await apply(session, order_placed, event)

    assert len((await session.execute(select(notification))).all()) == 1
    assert (len(first.pending), len(second.pending)) == (1, 0)


async def test_one_call_writes_a_row_and_registers_a_send_per_event(
    session: AsyncSession, sender: RecordingSender
) -> None:
    orders = [
        OrderPaid(order_id=f"o-{n}", user_id=f"u-{n % 2}", amount=Decimal(n), paid_at=NOW)
        for n in range(3)
    ]
    events = [envelope(order, 2) for order in orders]

    ctx = await apply(session, payment_received, *events)
    assert sender.sent == []

    rows = (await session.execute(select(notification).order_by(notification.c.id))).all()
    assert [(r.event_id, r.order_id, r.user_id, r.kind) for r in rows] == [
        (e.event_id, f"o-{n}", f"u-{n % 2}", "payment_received") for n, e in enumerate(events)
    ]
    for callback in ctx.pending:
        await callback()
    assert [n.event_id for n in sender.sent] == [e.event_id for e in events]


async def test_one_call_writes_and_sends_only_the_events_not_written_before(
    session: AsyncSession, sender: RecordingSender
) -> None:
    seen = envelope(CREATED, 1)
    await apply(session, order_placed, seen)
    new = envelope(CREATED, 1)

    ctx = await apply(session, order_placed, seen, new, new)

    assert len((await session.execute(select(notification))).all()) == 2
    for callback in ctx.pending:
        await callback()
    assert [n.event_id for n in sender.sent] == [new.event_id]


async def test_a_call_longer_than_one_in_list_writes_every_event(
    session: AsyncSession, sender: RecordingSender
) -> None:
    events = [envelope(CANCELLED, 3) for _ in range(1201)]
    await apply(session, order_cancelled, *events[:600])

    ctx = await apply(session, order_cancelled, *events)

    assert len((await session.execute(select(notification))).all()) == len(events)
    assert len(ctx.pending) == len(events) - 600


def test_set_sender_returns_the_previous_sender(sender: RecordingSender) -> None:
    replacement: Sender = RecordingSender()

    assert set_sender(replacement) is sender
    assert set_sender(sender) is replacement


async def test_the_default_sender_logs_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    note = Notification("e-1", "o-1", "u-1", "order_placed", NOW)

    with caplog.at_level(logging.DEBUG, logger="handlers.notification"):
        await LogSender().send(note)

    assert "e-1" in caplog.text and "order_placed" in caplog.text
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]


def test_importing_handlers_registers_notification_service_as_batch_handlers() -> None:
    assert handlers.notification is not None
    registered = {
        event_type: [
            (spec.fn, spec.batch) for spec in default_registry.handlers_for(CONSUMER, event_type)
        ]
        for event_type in ("OrderCreated", "OrderPaid", "OrderCancelled")
    }
    assert registered == {
        "OrderCreated": [(order_placed, True)],
        "OrderPaid": [(payment_received, True)],
        "OrderCancelled": [(order_cancelled, True)],
    }
