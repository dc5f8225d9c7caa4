"""notification-service: one notification per order event, sent after the commit.

The row is written inside the framework's transaction; the send is
registered with ``ctx.after_commit``, so nothing is sent for a transaction
that rolls back. The send is at most once: a crash between the commit and
the send loses it (the row remains, for a sweeper to resend if that matters).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Protocol

from app.context import HandlerContext
from app.db.dialect import insert_missing
from app.registry import handler
from handlers.tables import notification
from schemas.envelope import Envelope, Event
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


class Sender(Protocol):
    """Delivers a notification (e-mail, push, another service...)."""

    async def send(self, notification: Notification) -> None:
        """Deliver ``notification``; raising does not undo the committed row."""
        ...


class LogSender:
    """The default sender: writes the notification to the log."""

    async def send(self, notification: Notification) -> None:
        """Log ``notification`` at INFO."""
        log.info("notification %s", notification)


_sender: Sender = LogSender()


def set_sender(sender: Sender) -> Sender:
    """Make ``sender`` deliver every notification from now on; returns the previous one."""
    global _sender
    previous, _sender = _sender, sender
    return previous


async def _notify(kind: str, event: Event, ctx: HandlerContext) -> None:
    """Write the row for ``event`` (any order event) and send it after the commit."""
    note = Notification(
        event_id=event.event_id,
        order_id=event.data.order_id,
        user_id=event.data.user_id,
        kind=kind,
        created_at=datetime.now(UTC),
    )
    # One statement; the unique event_id makes a second write (and send) a no-op.
    if await insert_missing(ctx.session, notification, [asdict(note)]) == 0:
        return
    sender = _sender
    ctx.after_commit(lambda: sender.send(note))


@handler("OrderCreated", consumer=CONSUMER)
async def order_placed(event: Envelope[OrderCreated], ctx: HandlerContext) -> None:
    """Tell the user their order was placed."""
    await _notify("order_placed", event, ctx)


@handler("OrderPaid", consumer=CONSUMER)
async def payment_received(event: Envelope[OrderPaid], ctx: HandlerContext) -> None:
    """Tell the user their payment was received."""
    await _notify("payment_received", event, ctx)


@handler("OrderCancelled", consumer=CONSUMER)
async def order_cancelled(event: Envelope[OrderCancelled], ctx: HandlerContext) -> None:
    """Tell the user their order was cancelled."""
    await _notify("order_cancelled", event, ctx)
