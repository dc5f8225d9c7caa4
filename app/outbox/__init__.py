"""The transactional outbox: events written in the caller's transaction, shipped by a relay.

An order service adds its events to ``outbox_event`` in the transaction that
changes its orders (``add_events`` for async SQLAlchemy sessions,
``add_events_sync`` for sync ones); a handler does the same with ``ctx.emit``; the
worker writes its own retry and dead-letter records there with the failure that
caused them. The relay (``python -m app relay``, or inside the worker with
``RELAY_ENABLED``) claims due rows, publishes them and marks them ``PUBLISHED``.
"""

from __future__ import annotations

from app.outbox.event import NewEvent
from app.outbox.writer import add_events, add_events_sync

__all__ = ["NewEvent", "add_events", "add_events_sync"]
