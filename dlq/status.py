"""The DLQ command's side of ``failed_event``: read statuses, record an operator's decision
(and read the records the relay gave up on: ``dlq.unpublished``).

A decision is a compare-and-set on the status the command showed: if a
worker (or another operator) changed the row since, the decision is not
written and the record is not published. The command writes the decision
before it publishes, so the worker's own update for the replayed record
(``resolved``, ``skipped``, or ``retrying`` again) always comes after ours
and is the one that stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

from sqlalchemy import CursorResult, and_, inspect, select, tuple_, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.engine import create_engine
from app.db.said import driver_said
from app.db.tables import aggregate_version, consumed_event, failed_event
from app.db.urls import missing_sqlite_file
from app.db.urls import shown as shown_url
from dlq import unpublished
from dlq.blocking import waiting_on
from dlq.dead import DeadLetter, FailureKey, FailureState, FailureStatus
from dlq.errors import DatabaseUnreachable

CONNECT_TIMEOUT_SECONDS = 10.0
# Four bound parameters per key: 200 keys stay under old SQLite's limit of 999.
_KEYS_PER_SELECT = 200
_UNREACHABLE = (SQLAlchemyError, OSError, TimeoutError)


class FailureStore:
    """Reads and writes the ``failed_event`` rows of dead-letter records."""

    def __init__(self, engine: AsyncEngine, shown_url: str) -> None:
        self._engine = engine
        self._shown_url = shown_url

    @property
    def engine(self) -> AsyncEngine:
        """The workers' database (checked to answer and to hold ``failed_event``)."""
        return self._engine

    async def states(self, keys: Iterable[FailureKey]) -> dict[FailureKey, FailureState]:
        """The status and decision of every row among ``keys`` (missing rows are absent)."""
        t = failed_event
        wanted = sorted(set(keys))
        found: dict[FailureKey, FailureState] = {}
        columns = (t.c.consumer_group, t.c.topic, t.c.partition, t.c.offset)
        async with self._connected() as conn:
            for start in range(0, len(wanted), _KEYS_PER_SELECT):
                chunk = wanted[start : start + _KEYS_PER_SELECT]
                query = select(*columns, t.c.status, t.c.decided_by, t.c.decision_note).where(
                    tuple_(*columns).in_(chunk)
                )
                for group, topic, partition, offset, status, by, note in await conn.execute(query):
                    found[(group, topic, partition, offset)] = FailureState(status, by, note)
        return found

    async def unknown_consumers(self, names: Iterable[str]) -> list[str]:
        """Of ``names``, those no row of the database knows as a consumer: none took a
        version, applied an event or failed one (a name mistyped, most likely)."""
        unknown = []
        async with self._connected() as conn:
            for name in dict.fromkeys(names):
                for table in (aggregate_version, consumed_event, failed_event):
                    query = select(table.c.consumer_group).where(table.c.consumer_group == name)
                    if (await conn.execute(query.limit(1))).first() is not None:
                        break
                else:
                    unknown.append(name)
        return unknown

    async def still_waiting(
        self, dead: Iterable[DeadLetter], states: Mapping[FailureKey, FailureState]
    ) -> dict[FailureKey, tuple[str, ...]]:
        """For each poison record of ``dead`` whose row a skip settled (``skipped``) while
        some consumers still wait for its version: those consumers."""
        found: dict[FailureKey, tuple[str, ...]] = {}
        async with self._connected() as conn:
            for letter in dead:
                key = letter.failure_key
                if key is None or key not in states or not letter.is_poison:
                    continue
                kind, name, version = (
                    letter.aggregate_type,
                    letter.aggregate_id,
                    letter.aggregate_version,
                )
                if states[key].status != FailureStatus.SKIPPED or not (kind and name and version):
                    continue
                names = await waiting_on(conn, kind, name, version)
                if names:
                    found[key] = tuple(names)
        return found

    async def unpublished(self, dlt: str) -> list[DeadLetter]:
        """The failures of ``dlt`` and its retry tiers whose record the relay gave up on."""
        async with self._connected() as conn:
            return await unpublished.unpublished(conn, dlt)

    async def forget(self, outbox_id: int) -> None:
        """Delete the ``DEAD`` outbox row a replay or skip took the place of."""
        async with self._connected(begin=True) as conn:
            await unpublished.forget(conn, outbox_id)

    async def decide(
        self, key: FailureKey, seen: FailureState, status: str, by: str, note: str | None
    ) -> bool:
        """Set ``status`` and the decision if the row still holds ``seen``; False if it moved on."""
        return await self._set(key, seen.status, FailureState(status, by, note))

    async def undo(self, key: FailureKey, seen: FailureState, status: str) -> bool:
        """Put back ``seen`` where ``decide`` set ``status`` (the publish then failed)."""
        return await self._set(key, status, seen)

    async def _set(self, key: FailureKey, expected: str, new: FailureState) -> bool:
        t = failed_event
        group, topic, partition, offset = key
        stmt = (
            update(t)
            .where(
                and_(
                    t.c.consumer_group == group,
                    t.c.topic == topic,
                    t.c.partition == partition,
                    t.c.offset == offset,
                    t.c.status == expected,
                )
            )
            .values(status=new.status, decided_by=new.decided_by, decision_note=new.decision_note)
        )
        async with self._connected(begin=True) as conn:
            result = cast(CursorResult[Any], await conn.execute(stmt))
        return result.rowcount == 1

    @asynccontextmanager
    async def _connected(self, begin: bool = False) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.begin() if begin else self._engine.connect() as conn:
                yield conn
        except _UNREACHABLE as exc:
            raise DatabaseUnreachable(f"database error at {self._shown_url}: {_why(exc)}") from None


@asynccontextmanager
async def failure_store(database_url: str) -> AsyncIterator[FailureStore]:
    """A ``FailureStore`` on ``database_url``, once it answered and holds ``failed_event``."""
    shown = shown_url(database_url)
    if missing_sqlite_file(database_url):  # aiosqlite would create it: an empty database
        raise DatabaseUnreachable(f"cannot reach the database at {shown}: no such file")
    engine = create_engine(database_url, pool_size=1)
    try:
        await _check(engine, shown)
        yield FailureStore(engine, shown)
    finally:
        await engine.dispose()


async def _check(engine: AsyncEngine, shown: str) -> None:
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS), engine.connect() as conn:
            present = await conn.run_sync(lambda sync: inspect(sync).has_table("failed_event"))
    except _UNREACHABLE as exc:
        raise DatabaseUnreachable(f"cannot reach the database at {shown}: {_why(exc)}") from None
    if not present:
        raise DatabaseUnreachable(
            f"the database at {shown} has no failed_event table (is it the workers' database?)"
        )


def _why(exc: BaseException) -> str:
    """The driver's own message, without SQLAlchemy's statement and link."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"no answer within {CONNECT_TIMEOUT_SECONDS:g} s"
    return driver_said(exc)
