"""The framework's reads and writes for one consumer's batch, inside its transaction.

Two workers may hold the same events at once (a zombie after a rebalance and the
partition's new owner). Their batches must serialise per aggregate:

- MySQL, MariaDB: ``read_versions`` locks the batch's version rows first
  (``SELECT ... FOR UPDATE``, creating the missing ones), so every later read sees
  a concurrent worker's commit or waits for it (SQLite serialises writers anyway).
- PostgreSQL, optimistically: ``read_versions`` reads the rows and the ``xmin`` of
  each (the transaction that wrote it) without a lock; ``save`` first writes every
  aggregate the batch advanced or parked an event of, only where the row is still
  the one read (``bulk.update_from(..., if_unchanged=True)``; a missing row is inserted,
  and a duplicate key says it appeared), in one statement with the dedup records
  (``bulk.together``). A row another transaction wrote meanwhile fails
  the batch with ``VersionConflict``: it is rolled back and run again, and reads what the other
  committed. A version row is written once per batch instead of locked and then
  written; stale and duplicate events need no write (what they rest on is committed
  and only moves forward).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Integer,
    Select,
    String,
    Table,
    and_,
    case,
    cast,
    delete,
    literal,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.exc import IntegrityError
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
from app.db.tables import (
    aggregate_version,
    consumed_event,
    failed_event,
    outbox_event,
    parked_event,
)
from app.pipeline.apply import RecordRefused
from app.pipeline.classify import is_unique_violation
from app.pipeline.decode import EventOf
from app.records import RawRecord, headers_from_json, headers_to_json
from dlq.dead import SETTLED, FailureStatus
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


FAILURE_KEY = ("consumer_group", "topic", "partition", "offset")
KEYS_PER_LOOKUP = 200
"""``failed_event``'s key: the consumer and the record's original position."""


def failure_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The ``FAILURE_KEY`` of a ``failed_event`` row."""
    return tuple(row[name] for name in FAILURE_KEY)


async def recorded_failures(
    session: AsyncSession, rows: Sequence[dict[str, Any]]
) -> dict[tuple[Any, ...], str]:
    """The keys of ``rows`` that ``failed_event`` holds already, with each row's status."""
    if not rows:
        return {}
    columns = [failed_event.c[name] for name in FAILURE_KEY]
    found: dict[tuple[Any, ...], str] = {}
    for matches in _key_matches({failure_key(row) for row in rows}):
        query = select(*columns, failed_event.c.status).where(matches)
        found.update((tuple(row[:-1]), row[-1]) for row in await session.execute(query))
    return found


async def dead_again(session: AsyncSession, row: dict[str, Any], since: Collection[str]) -> bool:
    """Mark ``row``'s failure dead again (its reason, attempts, exception and time) where its
    status is still one of ``since``; False if another transaction changed it first."""
    f = failed_event
    result = await session.execute(
        f.update()
        .where(*(f.c[name] == row[name] for name in FAILURE_KEY), f.c.status.in_(since))
        .values({name: row[name] for name in FAILURE_UPDATE_COLUMNS}),
        execution_options={"synchronize_session": False},
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def _key_matches(keys: Collection[tuple[Any, ...]]) -> list[ColumnElement[bool]]:
    """Conditions matching the ``failed_event`` rows of ``keys`` (``FAILURE_KEY``): primary
    key lookups, a few at a time (each key is four parameters), one condition per chunk."""
    wanted = sorted(keys)
    columns = [failed_event.c[name] for name in FAILURE_KEY]
    return [
        or_(*(and_(*(c == v for c, v in zip(columns, key, strict=True))) for key in chunk))
        for chunk in (
            wanted[start : start + KEYS_PER_LOOKUP]
            for start in range(0, len(wanted), KEYS_PER_LOOKUP)
        )
    ]


OPEN = tuple(status.value for status in FailureStatus if status not in SETTLED)
"""The ``failed_event`` statuses of an event that has not taken effect (as far as the row
knows): ``retrying``, ``dead``, ``replayed``, ``skip-requested``."""
_CONSUMED, _PARKED, _FAILED, _HOLDS = "c", "p", "f", "h"
# The failure key's columns and its attempts in the parts of the lookup that have none
# (typed, so that every database resolves the union's column types alike).
_NO_KEY = (
    cast(null(), String),
    cast(null(), Integer),
    cast(null(), BigInteger),
    cast(null(), Integer),
)
# The aggregate id of a dedup record, in the parts that have none.
_NO_AGGREGATE_ID = cast(null(), String)
# The statuses whose ``attempts`` count the attempts made so far: a record whose own
# attempt is among them was run already (delivered again: its offset's commit failed
# after its batch committed).
_ROUTED = (FailureStatus.RETRYING.value, FailureStatus.DEAD.value)


class Seen(NamedTuple):
    """What the dedup lookup found of a batch's eventIds, for one consumer."""

    consumed: set[str]  # applied (a dedup record)
    parked: set[str]  # waiting in ``parked_event``
    # Of those two, the event each record is of: its aggregate and version.
    recorded_as: dict[str, EventOf]
    open_failures: dict[str, list[tuple[Any, ...]]]  # failure keys of rows not settled
    # Of those retrying or dead, the attempts made so far, by failure key.
    attempts_made: dict[tuple[Any, ...], int]
    # Of the aggregates asked about (``parked_of``), those with parked events.
    holding: set[Aggregate]


class VersionConflict(Exception):
    """Another transaction wrote a version row this batch read, or a dedup record it was
    about to write: run the batch again."""


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
        self.optimistic = self.dialect == "postgresql"
        # PostgreSQL: each version row as read, (last_version, xmin); absent: no row.
        self._read: dict[Aggregate, tuple[int | None, str]] = {}

    async def read_versions(self, aggregates: Sequence[Aggregate]) -> dict[Aggregate, int | None]:
        """The last applied version of each of ``aggregates`` (``None``: none yet).

        Locks the rows (creating the missing ones) in sorted order, so that two
        workers can't deadlock on them; on PostgreSQL reads them and their ``xmin``
        instead, for ``save`` to check (see the module's docstring).
        """
        wanted = sorted(set(aggregates))
        if not wanted:
            return {}
        if self.optimistic:
            return await self._read_unlocked(wanted)
        versions = await self._select_for_update(wanted)
        missing = [agg for agg in wanted if agg not in versions]
        if missing:
            new_rows = self._new_version_rows((agg, None) for agg in missing)
            await insert_ignore(self.session, aggregate_version, new_rows)
            # Another worker may have inserted some of them first: lock what is there now.
            versions.update(await self._select_for_update(missing))
        return versions

    async def _read_unlocked(self, wanted: Sequence[Aggregate]) -> dict[Aggregate, int | None]:
        xmin = bulk.xmin_text(aggregate_version)
        for agg, last, seen in await self._select_versions(wanted, xmin):
            self._read[agg] = (last, seen)
        return {agg: last for agg, (last, _) in self._read.items()}

    def _new_version_rows(
        self, versions: Iterable[tuple[Aggregate, int | None]], stamp: datetime | None = None
    ) -> list[dict[str, Any]]:
        """``aggregate_version`` rows of ``versions`` (``None``: never applied)."""
        stamp = stamp or now()
        return [
            {
                "consumer_group": self.consumer,
                "aggregate_type": agg_type,
                "aggregate_id": agg_id,
                "last_version": last,
                "updated_at": stamp,
            }
            for (agg_type, agg_id), last in versions
        ]

    async def _select_for_update(self, aggs: Sequence[Aggregate]) -> dict[Aggregate, int | None]:
        return {agg: last for agg, last in await self._select_versions(aggs, lock=True)}

    async def _select_versions(
        self, aggs: Sequence[Aggregate], *extra: ColumnElement[Any], lock: bool = False
    ) -> list[tuple[Any, ...]]:
        """``(aggregate, last_version, *extra)`` of each version row of ``aggs`` that exists;
        ``lock``: ``FOR UPDATE``, in key order."""
        t = aggregate_version
        found: list[tuple[Any, ...]] = []
        for agg_type, ids in _by_type(aggs, self.list_size):
            stmt = select(t.c.aggregate_id, t.c.last_version, *extra).where(
                *self._of_aggregates(t, agg_type, ids)
            )
            if lock:
                stmt = stmt.order_by(t.c.aggregate_id).with_for_update()
            for agg_id, *rest in await self.session.execute(stmt):
                found.append(((agg_type, agg_id), *rest))
        return found

    async def seen_event_ids(
        self,
        event_ids: Sequence[str],
        applied_asked: Collection[str] | None = None,
        parked_of: Sequence[Aggregate] = (),
    ) -> Seen:
        """Which of ``event_ids`` this consumer already applied or parked, and its failures
        of them still open (one statement per list of ids: the third part is an index probe
        of ``failed_event``, which is nearly always empty for them). ``applied_asked``: the
        only ids whose dedup record is looked up (``None``: all), see ``ConsumerBatch``.
        ``parked_of``: aggregates whose having parked events is asked in the same statement
        (``Seen.holding``), so that ``parked_for`` reads only those that have any: nearly
        always none, and the batch is a statement shorter."""
        seen = Seen(set(), set(), {}, {}, {}, set())
        f = failed_event
        made = case((f.c.status.in_(_ROUTED), f.c.attempts), else_=None)
        holding = self._holding(parked_of)
        chunks = in_lists(event_ids, self.list_size)
        # Each list of ids with one list's worth of aggregates at most: a statement's
        # parameters stay within a few lists, however many the batch has of either.
        for index in range(max(len(chunks), len(holding))):
            ids = chunks[index] if index < len(chunks) else []
            asked = ids if applied_asked is None else [i for i in ids if i in applied_asked]
            parts = [*(holding[index] if index < len(holding) else [])]
            if asked:
                parts.append(self._recorded(consumed_event, _CONSUMED, asked))
            if ids:
                parts.append(self._recorded(parked_event, _PARKED, ids))
                parts.append(
                    select(
                        f.c.event_id,
                        literal(_FAILED),
                        f.c.topic,
                        f.c.partition,
                        f.c.offset,
                        made,
                        _NO_AGGREGATE_ID,
                    ).where(
                        f.c.consumer_group == self.consumer,
                        one_of(self.dialect, f.c.event_id, ids),
                        f.c.status.in_(OPEN),
                    )
                )
            rows = await self.session.execute(union_all(*parts))
            for event_id, kind, topic, partition, offset, attempts, agg_id in rows:
                if kind == _CONSUMED:
                    seen.consumed.add(event_id)
                    seen.recorded_as[event_id] = (topic, agg_id, partition)
                elif kind == _PARKED:
                    seen.parked.add(event_id)
                    seen.recorded_as[event_id] = (topic, agg_id, partition)
                elif kind == _HOLDS:  # an aggregate: its id, and its type in the topic column
                    seen.holding.add((topic, event_id))
                else:
                    key = (self.consumer, topic, partition, offset)
                    seen.open_failures.setdefault(event_id, []).append(key)
                    if attempts is not None:
                        seen.attempts_made[key] = attempts
        return seen

    def _recorded(self, t: Table, kind: str, ids: Sequence[str]) -> Select[Any]:
        """The lookup's part finding this consumer's records of ``ids`` in ``t`` (dedup
        records or parked events), each with the event it is of: the aggregate type in the
        key's topic column, the version in its partition column, then the aggregate id."""
        columns = (t.c.aggregate_type, t.c.aggregate_version, *_NO_KEY[2:], t.c.aggregate_id)
        return select(t.c.event_id, literal(kind), *columns).where(
            t.c.consumer_group == self.consumer, one_of(self.dialect, t.c.event_id, ids)
        )

    def _of_aggregates(
        self, t: Table, agg_type: str, ids: Sequence[str]
    ) -> tuple[ColumnElement[bool], ...]:
        """This consumer's rows of ``t`` for ``agg_type``'s ``ids`` (a key or index range)."""
        return (
            t.c.consumer_group == self.consumer,
            t.c.aggregate_type == agg_type,
            one_of(self.dialect, t.c.aggregate_id, ids),
        )

    def _holding(self, aggregates: Sequence[Aggregate]) -> list[list[Select[Any]]]:
        """The parts of the lookup naming which of ``aggregates`` have parked events: a part
        per aggregate type, packed into groups of one list's worth of aggregates."""
        t = parked_event
        groups: list[list[Select[Any]]] = []
        room = 0
        for agg_type, ids in _by_type(aggregates, self.list_size):
            if not groups or len(ids) > room:
                groups.append([])
                room = self.list_size
            room -= len(ids)
            groups[-1].append(
                select(
                    t.c.aggregate_id,
                    literal(_HOLDS),
                    t.c.aggregate_type,
                    *_NO_KEY[1:],
                    _NO_AGGREGATE_ID,
                )
                .where(*self._of_aggregates(t, agg_type, ids))
                .distinct()
            )
        return groups

    async def parked_for(
        self, aggregates: Sequence[Aggregate]
    ) -> dict[Aggregate, dict[int, ParkedRow]]:
        """Parked events of ``aggregates`` by version (usually none)."""
        t = parked_event
        result: dict[Aggregate, dict[int, ParkedRow]] = {}
        for agg_type, ids in _by_type(aggregates, self.list_size):
            stmt = select(t).where(*self._of_aggregates(t, agg_type, ids))
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
        """Write the batch's versions, dedup records, parked and unparked events, failures,
        and the outbox rows (the failures' records, the handlers' emitted events).

        Raises ``VersionConflict`` (PostgreSQL) when another transaction wrote one of the
        batch's version rows since ``read_versions``; nothing else is written then.
        """
        stamp = now()
        for row in changes.consumed:
            row["applied_at"] = stamp  # one moment for the batch: its commit follows
        if self.optimistic:
            await self._write_versions_and_claims(changes, stamp)
        else:
            rows = self._new_version_rows(sorted(changes.versions.items()), stamp)
            await update_rows(self.session, aggregate_version, VERSION_KEY, rows)
            await self._claim(consumed_event, changes.consumed)
        await execute_where_in(
            self.session,
            delete(parked_event).where(parked_event.c.consumer_group == self.consumer),
            parked_event.c.event_id,
            changes.unparked,
        )
        await self._claim(parked_event, changes.parked)
        await upsert(self.session, failed_event, changes.failed, FAILURE_UPDATE_COLUMNS)
        await update_rows(
            self.session,
            failed_event,
            ("consumer_group", "topic", "partition", "offset"),
            changes.resolved,
        )
        await self._settle_skipped_poison(changes.skipped_poison)
        await insert_rows(self.session, outbox_event, changes.outbox)
        await insert_rows(self.session, outbox_event, changes.emitted)

    async def _settle_skipped_poison(self, keys: Collection[tuple[Any, ...]]) -> None:
        """Mark the poison rows of ``keys`` ``skipped`` where they are ``skip-requested``.

        Poison is no consumer's: its row (consumer ``''``) is not the one a consumer's
        update of its own failure reaches. Once a consumer named in an operator's skip
        took it, no worker reads the record for that skip again; the row is settled, and
        retention deletes it in time. Any other status is a later decision, left as it is.
        """
        f = failed_event
        for matches in _key_matches(keys):
            await self.session.execute(
                f.update()
                .where(matches, f.c.status == FailureStatus.SKIP_REQUESTED.value)
                .values(status=FailureStatus.SKIPPED.value)
            )

    async def _claim(self, table: Table, rows: list[dict[str, Any]]) -> None:
        """Insert dedup (or parked) records, or version rows nobody had; ``VersionConflict``
        if another transaction committed one of them since the batch read them.

        An event without ``aggregateVersion`` claims no version row, so nothing else
        tells two workers holding it (a rebalance's zombie and the new owner, a retry
        copy and a main-topic copy) apart: the second insert of its key fails, and the
        batch runs again to find it applied.
        """
        try:
            await insert_rows(self.session, table, rows)
        except IntegrityError as exc:
            if not is_unique_violation(exc):
                raise
            raise VersionConflict(f"{table.name} record(s) written meanwhile") from exc

    async def claim_alone(self, table: Table, row: dict[str, Any]) -> None:
        """Insert one dedup (or parked) record in a savepoint of its own (``ESCALATED`` mode);
        ``RecordRefused`` if the database refuses it as a duplicate key (only it is undone)."""
        savepoint = await self.session.begin_nested()
        try:
            await insert_rows(self.session, table, [row])
        except IntegrityError as exc:
            await savepoint.rollback()
            if not is_unique_violation(exc):
                raise
            raise RecordRefused(table.name, exc) from exc
        await savepoint.commit()

    async def _write_versions_and_claims(self, changes: BatchChanges, stamp: datetime) -> None:
        """PostgreSQL, in one statement (``bulk.together``): write the version of every
        aggregate the batch advanced or parked an event of, where its row is as read (a
        row nobody had is inserted), and insert the batch's dedup records;
        ``VersionConflict`` if a version row was written meanwhile or a row appeared that
        the statement would insert (a duplicate key), and then nothing of it is written.

        A new version row goes in by a plain insert, as a dedup record does: ``ON
        CONFLICT DO NOTHING`` would probe the key first and log a speculative insert, a
        third more of the server's time per new row.
        """
        claims: dict[Aggregate, int | None] = dict(changes.versions)
        for agg in changes.held:
            claims.setdefault(agg, self._read[agg][0] if agg in self._read else None)
        if not claims and not changes.consumed:
            return
        ordered = sorted(claims.items())
        existing = [(agg, last) for agg, last in ordered if agg in self._read]
        changed = self._new_version_rows(existing, stamp)
        for (agg, _), row in zip(existing, changed, strict=True):
            row[bulk.SEEN] = self._read[agg][1]
        new = self._new_version_rows(
            ((agg, last) for agg, last in ordered if agg not in self._read), stamp
        )
        params = (
            bulk.params(aggregate_version, changed, "v")
            | bulk.params(aggregate_version, new, "n")
            # In key order, as the version rows: two writers meet on the first they share.
            | bulk.params(consumed_event, sorted(changes.consumed, key=_event_id), "c")
        )
        try:
            result = await self.session.execute(_WRITES, params, execution_options=_NO_SYNC)
        except IntegrityError as exc:
            if not is_unique_violation(exc):
                raise
            raise VersionConflict("version rows or dedup records written meanwhile") from exc
        written: int = result.one()[0]
        if written != len(changed):
            raise VersionConflict(f"{len(changed) - written} version row(s) changed meanwhile")


VERSION_KEY = ("consumer_group", "aggregate_type", "aggregate_id")
_event_id = itemgetter("event_id")
VERSION_COLUMNS = (*VERSION_KEY, "last_version", "updated_at")
CONSUMED_COLUMNS = (
    "consumer_group",
    "event_id",
    "event_type",
    "aggregate_type",
    "aggregate_id",
    "aggregate_version",
    "applied_at",
)
_NO_SYNC = {"synchronize_session": False}
# PostgreSQL: a batch's version rows, written where unchanged ("v") or new ("n"), and its
# dedup records ("c"), in one statement that returns how many of the first it wrote.
_WRITES = bulk.together(
    bulk.update_from(
        aggregate_version, VERSION_COLUMNS, VERSION_KEY, if_unchanged=True, prefix="v"
    ),
    (aggregate_version, VERSION_COLUMNS, "n"),
    (consumed_event, CONSUMED_COLUMNS, "c"),
)


@dataclass
class BatchChanges:
    """Rows one consumer's batch writes, collected in memory and written in a few statements."""

    consumed: list[dict[str, Any]]
    versions: dict[Aggregate, int]
    held: set[Aggregate]  # aggregates with an event parked by this batch
    parked: list[dict[str, Any]]
    unparked: set[str]
    failed: list[dict[str, Any]]
    resolved: list[dict[str, Any]]
    outbox: list[dict[str, Any]]  # the failures' retry and DLT records
    emitted: list[dict[str, Any]]  # events the handlers emitted
    skipped_poison: set[tuple[Any, ...]]  # poison rows whose skip a consumer took

    @classmethod
    def empty(cls) -> BatchChanges:
        """Nothing to write yet."""
        return cls([], {}, set(), [], set(), [], [], [], [], set())

    def resolve(self, trip: Trip, status: str) -> None:
        """Mark the ``failed_event`` row of an event that came back and took effect; for
        an operator's skip, also the poison row of its record, if it was poison (the
        consumer it names is one an operator skipped it for)."""
        key = (trip.consumer, trip.original_topic, trip.original_partition, trip.original_offset)
        self.settle(key, status)
        if trip.skip:
            self.skipped_poison.add(("", *key[1:]))

    def settle(self, key: tuple[Any, ...], status: str) -> None:
        """Mark the ``failed_event`` row of ``key`` (``FAILURE_KEY``) ``status``, unless the
        batch marks it already."""
        row = dict(zip(FAILURE_KEY, key, strict=True))
        if any(all(done[k] == row[k] for k in FAILURE_KEY) for done in self.resolved):
            return
        self.resolved.append(row | {"status": status})


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
