"""The relay's claim: which due rows a relay may take, without breaking an aggregate's order.

**The rule.** A row is published only after every earlier row (lower ``id``) of its
aggregate is ``PUBLISHED`` or ``DEAD``. A claim therefore takes, per aggregate, a
*chain*: the aggregate's earliest unpublished row and the ones after it, in id
order, as long as each is claimable (``PENDING`` and due, or ``PROCESSING`` under
a lease that expired), and stops at the first that is not: a row another relay
holds, or one waiting for its next attempt, holds back everything after it.

**Why ``SKIP LOCKED`` alone is not enough.** ``SELECT ... FOR UPDATE SKIP LOCKED``
skips a row another relay has locked and takes the next one: the later row of an
aggregate whose earlier row is being claimed elsewhere. Here a claim is one
transaction of three steps:

1. *scan*: read the unpublished rows in id order (``PENDING`` a page at a time,
   ``PROCESSING`` all of them) and plan the chains (``plan_chains``, pure);
2. *lock*: ``SELECT ... FOR UPDATE SKIP LOCKED`` the planned rows; the statement
   returns each row as last committed;
3. *keep*: of each chain, only the prefix that this relay locked *and* that is still
   claimable as locked (``keep_prefixes``, pure); mark those ``PROCESSING`` with
   this relay's lease, and commit.

A row skipped in step 2 (locked by another claim) or changed since step 1 (claimed
and committed by another relay) cuts its chain there: the rows after it are not
taken, so no relay ever holds a later row of an aggregate without the earlier
ones. Two relays planning the same chain both lock; whichever misses the chain's
head keeps nothing of it. Once committed, the ``PROCESSING`` rows hold the chain's
later rows back from everyone else until they are published, released or their
lease expires. SQLite has one writer: the claim's transaction begins with
``BEGIN IMMEDIATE`` (``app.db.engine``) and nothing can change under it.

*Limit:* "earlier" is the order of ``id``, given when a row is inserted, and a
relay sees only committed rows. Two transactions adding rows of one aggregate at
once may commit in the other order than their ids; the one with the lower id is
then published after the other. Lock the aggregate's own row (``UPDATE orders
...``) before adding its events, as an order service does anyway, and ids follow
commit order; consumers put versioned events in order again whatever happens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import not_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.dialect import backend, one_of
from app.db.tables import outbox_event as t
from app.outbox.status import OutboxStatus

Aggregate = tuple[str, str]
# Scanning stops after this many pages of unpublished rows, and later pages leave out at
# most this many aggregates already found blocked (a blocked head with a long tail behind it).
MAX_SCAN_PAGES = 20
MAX_EXCLUDED = 500


@dataclass(frozen=True, slots=True)
class Seen:
    """An unpublished row as the scan read it."""

    id: int
    aggregate: Aggregate
    status: str
    next_retry_at: datetime | None
    lease_expires_at: datetime | None

    def claimable(self, now: datetime) -> bool:
        """``PENDING`` and due, or ``PROCESSING`` under an expired lease."""
        if self.status == OutboxStatus.PENDING:
            return self.next_retry_at is None or aware(self.next_retry_at) <= now
        if self.status == OutboxStatus.PROCESSING:
            return self.lease_expires_at is None or aware(self.lease_expires_at) <= now
        return False


class Planner:
    """Builds the chains from unpublished rows fed in id order (one page after another)."""

    def __init__(self, now: datetime, limit: int) -> None:
        self.now = now
        self.limit = limit
        self.chains: dict[Aggregate, list[int]] = {}
        self.blocked: set[Aggregate] = set()
        self.count = 0

    @property
    def full(self) -> bool:
        """True once the chains hold ``limit`` rows."""
        return self.count >= self.limit

    def feed(self, rows: Iterable[Seen]) -> None:
        """Take ``rows`` (id order, after every row fed before)."""
        for row in rows:
            agg = row.aggregate
            if agg in self.blocked:
                continue
            if not self.full and row.claimable(self.now):
                self.chains.setdefault(agg, []).append(row.id)
                self.count += 1
            else:
                # Everything after this row of its aggregate waits for it.
                self.blocked.add(agg)


def plan_chains(rows: Iterable[Seen], now: datetime, limit: int) -> dict[Aggregate, list[int]]:
    """The chains to claim from every unpublished row up to some id, fed in id order."""
    planner = Planner(now, limit)
    planner.feed(rows)
    return planner.chains


def keep_prefixes(
    chains: Mapping[Aggregate, Sequence[int]], locked: Mapping[int, Seen], now: datetime
) -> list[int]:
    """Of each chain, the rows up to the first one not locked or no longer claimable."""
    kept: list[int] = []
    for chain in chains.values():
        for row_id in chain:
            row = locked.get(row_id)
            if row is None or not row.claimable(now):
                break
            kept.append(row_id)
    return sorted(kept)


_SCAN_COLUMNS = (
    *(t.c.id, t.c.aggregate_type, t.c.aggregate_id),
    *(t.c.status, t.c.next_retry_at, t.c.lease_expires_at),
)


def _seen(row: Any) -> Seen:
    return Seen(row[0], (row[1], row[2]), row[3], row[4], row[5])


async def claim(
    session: AsyncSession,
    owner: str,
    now: datetime,
    lease_until: datetime,
    limit: int,
) -> list[dict[str, Any]]:
    """Claim up to ``limit`` rows for ``owner`` until ``lease_until``; the caller's transaction
    commits them as ``PROCESSING``. Returns the claimed rows in id order."""
    dialect = backend(session)
    planner = Planner(now, limit)
    await _scan(session, planner, limit)
    candidates = [row_id for chain in planner.chains.values() for row_id in chain]
    if not candidates:
        return []
    lock = select(t).where(one_of(dialect, t.c.id, candidates)).order_by(t.c.id)
    if dialect != "sqlite":
        lock = lock.with_for_update(skip_locked=True)
    rows = {row["id"]: dict(row) for row in (await session.execute(lock)).mappings()}
    locked = {row_id: _seen([row[c.name] for c in _SCAN_COLUMNS]) for row_id, row in rows.items()}
    kept = keep_prefixes(planner.chains, locked, now)
    if not kept:
        return []
    await session.execute(
        update(t)
        .where(one_of(dialect, t.c.id, kept))
        .values(
            status=OutboxStatus.PROCESSING.value,
            lease_owner=owner,
            lease_expires_at=lease_until,
            updated_at=now,
        ),
        execution_options={"synchronize_session": False},
    )
    claimed = [rows[row_id] for row_id in kept]
    for row in claimed:
        row["status"] = OutboxStatus.PROCESSING.value
    return claimed


async def _scan(session: AsyncSession, planner: Planner, page: int) -> None:
    """Feed ``planner`` every unpublished row in id order, a page of ``PENDING`` rows at a time
    (with the ``PROCESSING`` rows among them), until it is full or the rows run out."""
    processing = [
        _seen(row)
        for row in await session.execute(
            select(*_SCAN_COLUMNS)
            .where(t.c.status == OutboxStatus.PROCESSING.value)
            .order_by(t.c.id)
        )
    ]
    after = 0
    for _ in range(MAX_SCAN_PAGES):
        query = select(*_SCAN_COLUMNS).where(
            t.c.status == OutboxStatus.PENDING.value, t.c.id > after
        )
        excluded = sorted(planner.blocked)[:MAX_EXCLUDED]
        if excluded:
            query = query.where(not_(tuple_(t.c.aggregate_type, t.c.aggregate_id).in_(excluded)))
        pending = [_seen(row) for row in await session.execute(query.order_by(t.c.id).limit(page))]
        last = pending[-1].id if len(pending) == page else None
        mine = [row for row in processing if last is None or row.id <= last]
        processing = processing[len(mine) :]
        planner.feed(sorted([*pending, *mine], key=lambda row: row.id))
        if last is None or planner.full:
            return
        after = last


def aware(moment: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite and MySQL keep no zone; we write UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
