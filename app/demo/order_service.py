"""The demo's order service: each order change and its event written in one transaction.

It keeps an ``orders`` table of its own (the demo creates it; the framework's
migrations do not) and adds each event to the outbox with the framework's writer
in the transaction that changes the order, so an event exists if and only if its
change does. The relay (in the worker, ``RELAY_ENABLED``) ships the outbox to the
topic. A few orders are written out of order, as two instances of a service can:
the consumers put their versions back in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, String, Table
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.db.dialect import upsert
from app.db.engine import session_factory
from app.outbox import NewEvent, add_events

order_metadata = MetaData()

orders = Table(
    "orders",
    order_metadata,
    Column("order_id", String(64), primary_key=True),
    Column("user_id", String(64), nullable=False),
    Column("status", String(20), nullable=False),
    Column("amount_cents", BigInteger, nullable=False),
    Column("version", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

STATUS = {"OrderCreated": "created", "OrderPaid": "paid", "OrderCancelled": "cancelled"}
EVENTS_PER_TRANSACTION = 25


def as_event(topic: str, env: dict[str, Any]) -> NewEvent:
    """The outbox event that carries ``env`` (its eventId and occurredAt kept)."""
    return NewEvent(
        topic=topic,
        event_type=env["eventType"],
        aggregate_type=env["aggregateType"],
        aggregate_id=env["aggregateId"],
        data=env["data"],
        aggregate_version=env.get("aggregateVersion"),
        event_version=env["eventVersion"],
        event_id=env["eventId"],
        occurred_at=datetime.fromisoformat(env["occurredAt"].replace("Z", "+00:00")),
        trace_id=env.get("traceId"),
        correlation_id=env.get("correlationId"),
        causation_id=env.get("causationId"),
        tenant_id=env.get("tenantId"),
        source=env.get("source"),
    )


async def create_orders_table(engine: AsyncEngine) -> None:
    """The order service's own table (if missing)."""
    async with engine.begin() as conn:
        await conn.run_sync(order_metadata.create_all)


async def write_orders(engine: AsyncEngine, topic: str, envelopes: Iterable[dict[str, Any]]) -> int:
    """Apply each distinct event to ``orders`` and add it to the outbox, in transactions of
    ``EVENTS_PER_TRANSACTION``; returns how many events were written."""
    sessions = session_factory(engine)
    seen: set[str] = set()
    batch: list[dict[str, Any]] = []
    written = 0
    for env in envelopes:
        if env["eventId"] in seen:
            continue
        seen.add(env["eventId"])
        batch.append(env)
        if len(batch) == EVENTS_PER_TRANSACTION:
            written += await _transaction(sessions, topic, batch)
            batch = []
    if batch:
        written += await _transaction(sessions, topic, batch)
    return written


async def _transaction(sessions: Any, topic: str, envelopes: Sequence[dict[str, Any]]) -> int:
    session: AsyncSession
    async with sessions() as session, session.begin():
        now = datetime.now(UTC)
        changes: dict[str, dict[str, Any]] = {}
        for env in envelopes:  # the order row as the last event of the batch leaves it
            data = env["data"]
            previous = changes.get(env["aggregateId"], {})
            changes[env["aggregateId"]] = {
                "order_id": env["aggregateId"],
                "user_id": data["userId"],
                "status": STATUS.get(env["eventType"], "changed"),
                "amount_cents": previous.get("amount_cents", _cents(data.get("amount"))),
                "version": max(env["aggregateVersion"], previous.get("version", 0)),
                "updated_at": now,
            }
        await upsert(session, orders, list(changes.values()), ("status", "version", "updated_at"))
        await add_events(session, [as_event(topic, env) for env in envelopes])
    return len(envelopes)


def _cents(amount: Any) -> int:
    return round(float(amount or 0) * 100)
