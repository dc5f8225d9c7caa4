"""notification-service: one notification per order event, sent after the commit.

The row is written inside the framework's transaction; the send is
registered with ``ctx.after_commit``, so nothing is sent for a transaction
that rolls back. The send is at most once: a crash between the commit and
the send loses it (the row remains, for a sweeper to resend if that matters).

The handlers are batch handlers: one call writes the rows of many events in
two statements, whatever their number (on MySQL and SQLite one more per 500 events, see
``app.db.dialect.list_size``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Protocol

from sqlalchemy import select

from app import Envelope, Event, HandlerContext, handler, insert_ignore, rows_where_in
from handlers.tables import notification
from schemas.order import OrderCancelled, OrderCreated, OrderPaid

CONSUMER = "notification-service"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Notification:
    """What a sender is asked to deliver; ``event_id`` doubles as an idempotency key."""

    event_id: str
    order_id: str
    user_id: str
    kind: str
    created_at: datetime

    def row(self) -> dict[str, object]:
        """The ``notification`` table row (``asdict`` would deep-copy every field)."""
        return {
            "event_id": self.event_id,
            "order_id": self.order_id,
            "user_id": self.user_id,
            "kind": self.kind,
            "created_at": self.created_at,
        }


class Sender(Protocol):
    """Delivers a notification (e-mail, push, another service...)."""

    async def send(self, notification: Notification) -> None:
        """Deliver ``notification``; raising does not undo the committed row."""
        ...


class LogSender:
    """The default sender: writes the notification to the log, at DEBUG.

    A stand-in for a real delivery; at INFO a busy worker would write a line per
    order event (about 28 MB of log per 100k events).
    """

    async def send(self, notification: Notification) -> None:
        """Log ``notification`` at DEBUG."""
        log.debug("notification %s", notification)


_sender: Sender = LogSender()


def set_sender(sender: Sender) -> Sender:
    """Make ``sender`` deliver every notification from now on; returns the previous one."""
    global _sender
    previous, _sender = _sender, sender
    return previous


async def _notify(kind: str, events: list[Event], ctx: HandlerContext) -> None:
    """Write one row per event (any order event) and send each new one after the commit.

    Two statements: read which of the events were written before, insert the
    others. The insert skips a row that appeared since the read; the send it
    then repeats is harmless, ``event_id`` being the sender's idempotency key.
    """
    written = {
        row.event_id
        for row in await rows_where_in(
            ctx.session,
            select(notification.c.event_id),
            notification.c.event_id,
            (event.event_id for event in events),
        )
    }
    notes: list[Notification] = []
    for event in events:
        if event.event_id in written:
            continue  # written (and sent) before, or earlier in this list
        written.add(event.event_id)
        notes.append(
            Notification(
                event_id=event.event_id,
                order_id=event.data.order_id,
                user_id=event.data.user_id,
                kind=kind,
                created_at=datetime.now(UTC),
            )
        )
    if not notes:
        return
    await insert_ignore(ctx.session, notification, [note.row() for note in notes])
    sender = _sender
    for note in notes:
        # One callback per notification: a send that fails does not hold back the others.
        ctx.after_commit(partial(sender.send, note))


@handler("OrderCreated", consumer=CONSUMER, batch=True)
async def order_placed(events: list[Envelope[OrderCreated]], ctx: HandlerContext) -> None:
    """Tell the users their orders were placed."""
    await _notify("order_placed", events, ctx)


@handler("OrderPaid", consumer=CONSUMER, batch=True)
async def payment_received(events: list[Envelope[OrderPaid]], ctx: HandlerContext) -> None:
    """Tell the users their payments were received."""
    await _notify("payment_received", events, ctx)


@handler("OrderCancelled", consumer=CONSUMER, batch=True)
async def order_cancelled(events: list[Envelope[OrderCancelled]], ctx: HandlerContext) -> None:
    """Tell the users their orders were cancelled."""
    await _notify("order_cancelled", events, ctx)
