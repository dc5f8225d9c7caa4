"""effectively-once: consume business events from Kafka, apply each effect exactly once, in order.

The public API for handler authors is imported from here::

    from app import HandlerContext, Envelope, add_to_counter, event_model, handler

Everything else is internal and may move. Names are imported on first use,
so that ``import app`` stays cheap (no faust, no SQLAlchemy until needed).
``faust -A app worker`` finds ``app.app``: the faust app is built on first
access, from the environment.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.context import HandlerContext
    from app.db.dialect import (
        add_to_counter,
        execute_where_in,
        insert_ignore,
        insert_rows,
        rows_where_in,
        update_rows,
        upsert,
    )
    from app.db.tables import binary_id
    from app.errors import ConfigurationError, PermanentError, RetryableError
    from app.outbox import NewEvent, add_events, add_events_sync
    from app.registry import handler
    from schemas.envelope import Envelope, Event
    from schemas.ids import Id, IdField
    from schemas.registry import event_model

# Public name -> the module defining it.
_PUBLIC = {
    "handler": "app.registry",
    "HandlerContext": "app.context",
    "Envelope": "schemas.envelope",
    "Event": "schemas.envelope",
    "event_model": "schemas.registry",
    # Ids as producers write them (a JSON string or integer), for payload models.
    "Id": "schemas.ids",
    "IdField": "schemas.ids",
    "PermanentError": "app.errors",
    "RetryableError": "app.errors",
    "ConfigurationError": "app.errors",
    # Events to publish, written in the caller's transaction (``ctx.emit`` in a handler).
    "NewEvent": "app.outbox",
    "add_events": "app.outbox",
    "add_events_sync": "app.outbox",
    # The statements whose SQL differs between PostgreSQL, MySQL/MariaDB and SQLite.
    "add_to_counter": "app.db.dialect",
    "execute_where_in": "app.db.dialect",
    "insert_ignore": "app.db.dialect",
    "insert_rows": "app.db.dialect",
    "rows_where_in": "app.db.dialect",
    "update_rows": "app.db.dialect",
    "upsert": "app.db.dialect",
    # An id column of your own tables, compared byte for byte on every database.
    "binary_id": "app.db.tables",
}

__all__ = [
    "ConfigurationError",
    "Envelope",
    "Event",
    "HandlerContext",
    "Id",
    "IdField",
    "NewEvent",
    "PermanentError",
    "RetryableError",
    "add_events",
    "add_events_sync",
    "add_to_counter",
    "binary_id",
    "event_model",
    "execute_where_in",
    "handler",
    "insert_ignore",
    "insert_rows",
    "rows_where_in",
    "update_rows",
    "upsert",
]


def __getattr__(name: str) -> Any:
    if name == "app":
        from app.runtime.entry import build_app_or_exit

        value = build_app_or_exit()
    elif name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
    else:
        raise AttributeError(f"module 'app' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, "app"})
