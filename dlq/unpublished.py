"""Failures whose retry or dead-letter record never reached its topic, as dead letters.

The worker writes each retry-tier and DLT record as an outbox row (``app.outbox.records``).
A row the relay gave up on (``DEAD``: the broker refused the record, too large for the
topic's ``max.message.bytes`` even with the failure's text cut, or the topic is missing)
holds an event that is in no topic: its consumer's later versions of the aggregate wait
for it. The DLQ command lists these next to the DLT's records, as ``unpublished``, built
from the row (the record's bytes and headers) and the failure's ``failed_event`` row (the
event, the reason, the attempts). A replay or skip of one takes its place; its ``DEAD``
row is then deleted (the ``failed_event`` row keeps the bytes and the decision). Rows
still ``PENDING`` are left out: the relay is still trying them, and they go ``DEAD``
after ``RELAY_MAX_ATTEMPTS`` (``python -m app outbox list --status PENDING`` shows them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy import and_, delete, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import failed_event
from app.db.tables import outbox_event as t
from app.outbox.claim import aware
from app.outbox.status import RECORD_AGGREGATE_TYPE, OutboxStatus
from app.records import RawRecord, headers_from_json
from dlq import headers as h
from dlq.dead import UNPUBLISHED_PARTITION, DeadLetter, FailureKey, Unpublished
from dlq.topics import DLT_SUFFIX, RETRY_INFIX

TOO_LARGE = ("MessageSizeTooLarge", "RecordTooLarge")
_OUTBOX = (t.c.id, t.c.topic, t.c.event_type, t.c.retry_count, t.c.last_error, t.c.updated_at)
_RECORD = (t.c.record_key, t.c.record_value, t.c.record_headers)
_FAILED = (
    *("event_id", "event_type", "aggregate_type", "aggregate_id", "aggregate_version"),
    *("reason", "exception_type", "exception_message", "attempts"),
    *("first_failed_at", "last_failed_at"),
)
_KEY = (
    failed_event.c.consumer_group,
    failed_event.c.topic,
    failed_event.c.partition,
    failed_event.c.offset,
)


def _ours(dlt: str) -> Any:
    """The ``DEAD`` rows of the worker's own records for ``dlt`` and its retry tiers."""
    base = dlt.removesuffix(DLT_SUFFIX)
    return and_(
        t.c.status == OutboxStatus.DEAD.value,
        t.c.aggregate_type == RECORD_AGGREGATE_TYPE,
        t.c.record_headers.is_not(None),
        or_(t.c.topic == dlt, t.c.topic.startswith(base + RETRY_INFIX, autoescape=True)),
    )


async def unpublished(conn: AsyncConnection, dlt: str) -> list[DeadLetter]:
    """Every failure of ``dlt``'s family whose record the relay gave up on, oldest row first."""
    query = select(*_OUTBOX, *_RECORD).where(_ours(dlt)).order_by(t.c.id)
    found = [of_row(row) for row in (await conn.execute(query)).mappings()]
    keys = [dead.failure_key for dead in found if dead.failure_key is not None]
    failed: dict[FailureKey, Mapping[Any, Any]] = {}
    if keys:
        columns = (failed_event.c[name] for name in _FAILED)
        rows = await conn.execute(select(*_KEY, *columns).where(tuple_(*_KEY).in_(keys)))
        failed = {tuple(row[:4]): row._mapping for row in rows}
    return [
        with_failure(dead, failed.get(dead.failure_key)) if dead.failure_key else dead
        for dead in found
    ]


def of_row(row: Mapping[Any, Any]) -> DeadLetter:
    """The record an outbox row holds, read like a DLT record; a retry record's consumer
    is its ``retry-consumer-group``."""
    record = RawRecord(
        row["topic"],
        UNPUBLISHED_PARTITION,
        int(row["id"]),
        row["record_key"],
        row["record_value"],
        headers_from_json(row["record_headers"]),
    )
    dead = DeadLetter.of(record)
    consumer = dead.consumer or (record.header(h.RETRY_CONSUMER_GROUP) or b"").decode() or None
    where = Unpublished(
        int(row["id"]),
        row["topic"],
        row["event_type"],
        int(row["retry_count"]),
        row["last_error"] or "",
        row["updated_at"],
    )
    return replace(dead, consumer=consumer, unpublished=where)


def with_failure(dead: DeadLetter, failed: Mapping[Any, Any] | None) -> DeadLetter:
    """``dead`` with what its ``failed_event`` row says of the event and its failure (a retry
    record's headers carry neither)."""
    if failed is None:
        return dead
    return replace(
        dead,
        reason=failed["reason"],
        exception_type=failed["exception_type"],
        exception_message=failed["exception_message"],
        attempts=failed["attempts"],
        first_failure_at=aware(failed["first_failed_at"]),
        last_failure_at=aware(failed["last_failed_at"]),
        event_id=failed["event_id"],
        event_type=failed["event_type"],
        aggregate_type=failed["aggregate_type"],
        aggregate_id=failed["aggregate_id"],
        aggregate_version=failed["aggregate_version"],
    )


def advice(where: Unpublished) -> str:
    """What the operator can do, in one line."""
    requeue = f"python -m app outbox requeue {where.outbox_id} --execute"
    if any(name in where.last_error for name in TOO_LARGE):
        return (
            f"too large for {where.topic}: raise its max.message.bytes, then {requeue}; "
            "or replay or skip it here"
        )
    return f"fix the cause, then {requeue}; or replay or skip it here"


async def forget(conn: AsyncConnection, outbox_id: int) -> None:
    """Delete the ``DEAD`` row whose record a replay or skip just took the place of."""
    await conn.execute(
        delete(t).where(
            t.c.id == outbox_id,
            t.c.status == OutboxStatus.DEAD.value,
            t.c.aggregate_type == RECORD_AGGREGATE_TYPE,
        )
    )
