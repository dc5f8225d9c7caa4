"""notification-service: one row per order event, sent only after the transaction commits.

Contract: each of ``OrderCreated``, ``OrderPaid`` and ``OrderCancelled``
writes one ``notification`` row (its kind, order and user) and hands the send
to ``ctx.after_commit``; the handler itself never calls the sender. The same
eventId written twice leaves one row and one send. ``set_sender`` swaps the
sender and returns the previous one; the default ``LogSender`` logs. The
handlers run on a real SQLite database created by the migrations.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

import handlers
from app.context import AfterCommit, HandlerContext
from app.db.engine import create_engine, session_factory
from app.db.migrate import upgrade_to_head
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
async def session(tmp_path: Path) -> AsyncIterator[AsyncSession]:
    """A session on a fresh, migrated SQLite database."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'notification.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    async with session_factory(engine)() as db_session:
        yield db_session
    await engine.dispose()


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


async def apply(session: AsyncSession, fn: HandlerFn, event: Envelope[Any]) -> RecordingContext:
    """Run one handler and commit, leaving its after-commit callbacks pending."""
    ctx = RecordingContext(session)
    await fn(event, ctx)
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
    await order_placed(envelope(CREATED, 1), ctx)
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


def test_set_sender_returns_the_previous_sender(sender: RecordingSender) -> None:
    replacement: Sender = RecordingSender()

    assert set_sender(replacement) is sender
    assert set_sender(sender) is replacement


async def test_the_default_sender_logs(caplog: pytest.LogCaptureFixture) -> None:
    note = Notification("e-1", "o-1", "u-1", "order_placed", NOW)

    with caplog.at_level(logging.INFO, logger="handlers.notification"):
        await LogSender().send(note)

    assert "e-1" in caplog.text and "order_placed" in caplog.text


def test_importing_handlers_registers_notification_service() -> None:
    assert handlers.notification is not None
    registered = {
        event_type: [spec.fn for spec in default_registry.handlers_for(CONSUMER, event_type)]
        for event_type in ("OrderCreated", "OrderPaid", "OrderCancelled")
    }
    assert registered == {
        "OrderCreated": [order_placed],
        "OrderPaid": [payment_received],
        "OrderCancelled": [order_cancelled],
    }
