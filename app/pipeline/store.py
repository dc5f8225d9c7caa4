"""The framework's reads and writes for one consumer's batch, inside its transaction.

Every read here happens after ``lock_versions`` took the row locks of the
batch's aggregates, so a concurrent worker (or a zombie after a rebalance)
either committed before we read or waits until we commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import bulk
from app.db.dialect import (
    backend,
    execute_where_in,
    in_lists,
    insert_ignore,
    insert_rows,
    list_size,
    one_of,
    update_rows,
    upsert,
)
from app.db.tables import aggregate_version, consumed_event, failed_event, parked_event
from app.records import RawRecord, headers_from_json, headers_to_json
from dlq.trip import Trip

Aggregate = tuple[str, str]

# What a later failure of the same record overwrites (first_failed_at stays).
FAILURE_UPDATE_COLUMNS = (
    "status",
    "attempts",
    "reason",
    "exception_type",
    "exception_message",
    "last_failed_at",
)


def _by_type(aggregates: Iterable[Aggregate], size: int) -> Iterable[tuple[str, list[str]]]:
    """``(type, sorted ids)`` chunks. One type per statement, so every lookup is a primary-key
    (or index) range on ``aggregate_id = ANY(...)``: a row-value IN over both columns is
    planned as a filter over every row of the type."""
    by_type: dict[str, set[str]] = {}
    for agg_type, agg_id in aggregates:
        by_type.setdefault(agg_type, set()).add(agg_id)
    for agg_type in sorted(by_type):
        for chunk in in_lists(by_type[agg_type], size):
            yield agg_type, chunk


def now() -> datetime:
    """The timestamp written into the framework's tables."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ParkedRow:
    """A parked event as stored: enough to decode and apply it later."""

    event_id: str
    version: int
    record: RawRecord


class ConsumerStore:
    """Reads and writes of one consumer's dedup, version and parking tables."""

    def __init__(self, session: AsyncSession, consumer: str) -> None:
        self.session = session
        self.consumer = consumer
        self.dialect = backend(session)
        self.list_size = list_size(self.dialect)

    async def lock_versions(self, aggregates: Sequence[Aggregate]) -> dict[Aggregate, int | None]:
        """Lock (creating if needed) the version rows of ``aggregates``; return their last version.

        Rows are locked in sorted order so two workers can't deadlock on them.
        """
        wanted = sorted(set(aggregates))
        if not wanted:
            return {}
        if self.dialect == "postgresql":
            return await self._lock_or_insert(wanted)
        versions = await self._select_for_update(wanted)
        missing = [agg for agg in wanted if agg not in versions]
        if missing:
            await insert_ignore(self.session, aggregate_version, self._new_version_rows(missing))
            # Another worker may have inserted some of them first: lock what is there now.
            versions.update(await self._select_for_update(missing))
        return versions

    async def _lock_or_insert(self, wanted: Sequence[Aggregate]) -> dict[Aggregate, int | None]:
        """PostgreSQL: the three steps above in one statement (``bulk.lock_or_insert``)."""
        rows = self._new_version_rows(wanted)
        stmt = bulk.lock_or_insert(
            aggregate_version,
            bulk.columns_of(rows),
            "last_version",
            ("aggregate_type", "aggregate_id", "last_version"),
        )
        result = await self.session.execute(stmt, bulk.params(aggregate_version, rows))
        return {(agg_type, agg_id): last for agg_type, agg_id, last in result}

    def _new_version_rows(self, aggregates: Sequence[Aggregate]) -> list[dict[str, Any]]:
        """``aggregate_version`` rows for ``aggregates`` that were never applied."""
        stamp = now()
        return [
            {
                "consumer_group": self.consumer,
                "aggregate_type": agg_type,
                "aggregate_id": agg_id,
                "last_version": None,
                "updated_at": stamp,
            }
            for agg_type, agg_id in aggregates
        ]

    async def _select_for_update(self, aggs: Sequence[Aggregate]) -> dict[Aggregate, int | None]:
        t = aggregate_version
        found: dict[Aggregate, int | None] = {}
        for agg_type, ids in _by_type(aggs, self.list_size):
            stmt = (
                select(t.c.aggregate_id, t.c.last_version)
                .where(
                    t.c.consumer_group == self.consumer,
                    t.c.aggregate_type == agg_type,
                    one_of(self.dialect, t.c.aggregate_id, ids),
                )
                .order_by(t.c.aggregate_id)
                .with_for_update()
            )
            for agg_id, last in await self.session.execute(stmt):
                found[(agg_type, agg_id)] = last
        return found

    async def seen_event_ids(self, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` this consumer already applied or parked."""
        seen: set[str] = set()
        for ids in in_lists(event_ids, self.list_size):
            consumed = select(consumed_event.c.event_id).where(
                consumed_event.c.consumer_group == self.consumer,
                one_of(self.dialect, consumed_event.c.event_id, ids),
            )
            parked = select(parked_event.c.event_id).where(
                parked_event.c.consumer_group == self.consumer,
                one_of(self.dialect, parked_event.c.event_id, ids),
            )
            seen.update((await self.session.scalars(union_all(consumed, parked))).all())
        return seen

    async def parked_for(
        self, aggregates: Sequence[Aggregate]
    ) -> dict[Aggregate, dict[int, ParkedRow]]:
        """Parked events of ``aggregates`` by version (usually none)."""
        t = parked_event
        result: dict[Aggregate, dict[int, ParkedRow]] = {}
        for agg_type, ids in _by_type(aggregates, self.list_size):
            stmt = select(t).where(
                t.c.consumer_group == self.consumer,
                t.c.aggregate_type == agg_type,
                one_of(self.dialect, t.c.aggregate_id, ids),
            )
            for row in (await self.session.execute(stmt)).mappings():
                record = RawRecord(
                    topic=row["topic"],
                    partition=row["partition"],
                    offset=row["offset"],
                    key=row["record_key"],
                    value=row["record_value"],
                    headers=headers_from_json(row["record_headers"]),
                )
                slot = result.setdefault((row["aggregate_type"], row["aggregate_id"]), {})
                slot[row["aggregate_version"]] = ParkedRow(
                    row["event_id"], row["aggregate_version"], record
                )
        return result

    async def save(self, changes: BatchChanges) -> None:
        """Write the batch's dedup records, versions, parked and unparked events, failures."""
        stamp = now()
        for row in changes.consumed:
            row["applied_at"] = stamp  # one moment for the batch: its commit follows
        await insert_rows(self.session, consumed_event, changes.consumed)
        await update_rows(
            self.session,
            aggregate_version,
            ("consumer_group", "aggregate_type", "aggregate_id"),
            [
                {
                    "consumer_group": self.consumer,
                    "aggregate_type": agg_type,
                    "aggregate_id": agg_id,
                    "last_version": version,
                }
                for (agg_type, agg_id), version in sorted(changes.versions.items())
            ],
            updated_at=stamp,
        )
        await execute_where_in(
            self.session,
            delete(parked_event).where(parked_event.c.consumer_group == self.consumer),
            parked_event.c.event_id,
            changes.unparked,
        )
        await insert_rows(self.session, parked_event, changes.parked)
        await upsert(self.session, failed_event, changes.failed, FAILURE_UPDATE_COLUMNS)
        await update_rows(
            self.session,
            failed_event,
            ("consumer_group", "topic", "partition", "offset"),
            changes.resolved,
        )


@dataclass
class BatchChanges:
    """Rows one consumer's batch writes, collected in memory and written in a few statements."""

    consumed: list[dict[str, Any]]
    versions: dict[Aggregate, int]
    parked: list[dict[str, Any]]
    unparked: set[str]
    failed: list[dict[str, Any]]
    resolved: list[dict[str, Any]]

    @classmethod
    def empty(cls) -> BatchChanges:
        """Nothing to write yet."""
        return cls([], {}, [], set(), [], [])

    def resolve(self, trip: Trip, status: str) -> None:
        """Mark the ``failed_event`` row of an event that came back and took effect."""
        self.resolved.append(
            {
                "consumer_group": trip.consumer,
                "topic": trip.original_topic,
                "partition": trip.original_partition,
                "offset": trip.original_offset,
                "status": status,
            }
        )


def parked_row(consumer: str, event: Any, record: RawRecord) -> dict[str, Any]:
    """The ``parked_event`` row of a versioned event that arrived early."""
    return {
        "consumer_group": consumer,
        "event_id": event.event_id,
        "aggregate_type": event.aggregate_type,
        "aggregate_id": event.aggregate_id,
        "aggregate_version": event.aggregate_version,
        "event_type": event.event_type,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "record_key": record.key,
        "record_value": record.value or b"",
        "record_headers": headers_to_json(record.headers),
        "parked_at": now(),
    }
