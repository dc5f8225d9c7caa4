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
transaction of five steps:

1. *scan*: read the unpublished rows in id order (``PENDING`` a page at a time,
   ``PROCESSING`` all of them) and plan the chains (``plan_chains``, pure);
2. *lock*: ``SELECT ... FOR UPDATE SKIP LOCKED`` the planned rows; the statement
   returns each row as last committed;
3. *keep*: of each chain, only the prefix that this relay locked *and* that is still
   claimable as locked (``keep_prefixes``, pure);
4. *check*: drop every kept chain whose aggregate has, as last committed now, an
   unpublished row before it (``_first_in_line``): the scan's statements each saw
   their own moment, so a row that went from ``PENDING`` to ``PROCESSING`` between
   two of them was seen by neither (``lock_claimable`` ends here);
5. *mark*: the rest ``PROCESSING`` with this relay's lease, and commit
   (``mark_processing``). The relay commits this in the background and sends
   nothing of the claim before it has committed: until then the rows' locks keep
   every other claim from them, as the lease does after.

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

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    exists,
    func,
    not_,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.dialect import backend, list_size, one_of
from app.db.tables import outbox_event as t
from app.outbox.by_status import status_in
from app.outbox.status import UNPUBLISHED, OutboxStatus
from app.outbox.written import aware

Aggregate = tuple[str, str]
# Scanning stops after this many pages of unpublished rows, and later pages leave out at
# most this many aggregates already found blocked (a blocked head with a long tail behind it).
MAX_SCAN_PAGES = 20
MAX_EXCLUDED = 500


_PENDING = OutboxStatus.PENDING.value
_PROCESSING = OutboxStatus.PROCESSING.value


class Seen(NamedTuple):
    """An unpublished row as the scan read it (a tuple: a claim reads thousands)."""

    id: int
    aggregate: Aggregate
    status: str
    next_retry_at: datetime | None
    lease_expires_at: datetime | None

    def claimable(self, now: datetime) -> bool:
        """``PENDING`` and due, or ``PROCESSING`` under an expired lease."""
        if self.status == _PENDING:
            return self.next_retry_at is None or aware(self.next_retry_at) <= now
        if self.status == _PROCESSING:
            return self.lease_expires_at is None or aware(self.lease_expires_at) <= now
        return False


class Planner:
    """Builds the chains from unpublished rows fed in id order (one page after another).
    ``held``: rows this relay holds in a cycle not yet settled, never taken again, even
    once their lease has expired."""

    def __init__(self, now: datetime, limit: int, held: Collection[int] = ()) -> None:
        self.now = now
        self.limit = limit
        self.held = held
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
            if not self.full and row.claimable(self.now) and row.id not in self.held:
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


_SCAN_NAMES = tuple(c.name for c in _SCAN_COLUMNS)


def _seen(row: Any) -> Seen:
    return Seen(row[0], (row[1], row[2]), row[3], row[4], row[5])


async def claim(
    session: AsyncSession,
    owner: str,
    now: datetime,
    lease_until: datetime,
    limit: int,
    floor: Floor | None = None,
    held: Mapping[int, Aggregate] | None = None,
) -> list[dict[str, Any]]:
    """Claim up to ``limit`` rows for ``owner`` until ``lease_until``; the caller's transaction
    commits them as ``PROCESSING``. Returns the claimed rows in id order. ``floor`` (kept by
    the caller from one claim to the next) lets the scan start at the lowest row that was
    unpublished last time. ``held``: the rows of the caller's cycles not settled yet (sent,
    or about to be), with their aggregates: they and their aggregates' later rows are left
    alone, even if their lease expired while their settlement waited."""
    rows = await lock_claimable(session, now, limit, floor, held)
    await mark_processing(session, owner, rows, now, lease_until)
    return rows


async def lock_claimable(
    session: AsyncSession,
    now: datetime,
    limit: int,
    floor: Floor | None = None,
    held: Mapping[int, Aggregate] | None = None,
) -> list[dict[str, Any]]:
    """The first part of ``claim``: the rows it takes, locked (``FOR UPDATE``) in the
    caller's transaction, in id order, not marked yet. Until ``mark_processing`` commits,
    the locks alone keep them from every other claim: another relay's lock skips them and
    its check counts them unpublished, so it takes no later row of their aggregates."""
    dialect = backend(session)
    # As they are now: the caller's settlements go on meanwhile, and the scan must leave
    # out of its read exactly the rows it then plans with.
    held = dict(held or {})
    planner = Planner(now, limit, held)
    floor = floor or Floor()
    await _scan(session, planner, limit, floor, held)
    candidates = [row_id for chain in planner.chains.values() for row_id in chain]
    if not candidates:
        return []
    lock = select(t.c.id, *(c for c in t.c if c.name != "id"))
    lock = lock.where(one_of(dialect, t.c.id, candidates)).order_by(t.c.id)
    if dialect != "sqlite":
        lock = lock.with_for_update(skip_locked=True)
    result = await session.execute(lock)
    names = list(result.keys())
    # Plain dicts from the rows' tuples: ``dict(mapping)`` per row cost a fifth of a claim.
    rows = {row[0]: dict(zip(names, row, strict=True)) for row in result}
    locked = {row_id: _seen([row[name] for name in _SCAN_NAMES]) for row_id, row in rows.items()}
    kept = keep_prefixes(planner.chains, locked, now)
    if kept:
        kept = await _first_in_line(session, dialect, [rows[row_id] for row_id in kept])
    claimed = [rows[row_id] for row_id in kept]
    for row in claimed:
        # Taken over from a lease that expired: a dead relay may have sent it already.
        row["recovered"] = row["status"] == _PROCESSING
    return claimed


async def mark_processing(
    session: AsyncSession,
    owner: str,
    rows: list[dict[str, Any]],
    now: datetime,
    lease_until: datetime,
) -> None:
    """The second part of ``claim``: ``rows`` (locked by ``lock_claimable`` in this
    transaction) become ``PROCESSING`` under ``owner``'s lease until ``lease_until``."""
    if not rows:
        return
    await session.execute(
        update(t)
        .where(one_of(backend(session), t.c.id, [row["id"] for row in rows]))
        .values(
            status=OutboxStatus.PROCESSING.value,
            lease_owner=owner,
            lease_expires_at=lease_until,
            updated_at=now,
        ),
        execution_options={"synchronize_session": False},
    )
    for row in rows:
        row["status"] = _PROCESSING


async def _first_in_line(
    session: AsyncSession, dialect: str, kept: list[dict[str, Any]]
) -> list[int]:
    """Of the locked chains, those whose aggregate has no unpublished row before them now.

    The scan's statements each see the rows as last committed when that statement ran
    (READ COMMITTED): a row can go from ``PENDING`` to ``PROCESSING`` between them and be
    seen by neither. This check runs after the lock and sees the latest commits (a row
    another relay is changing counts with its last committed status, unpublished), so
    the rule holds whatever the scan missed.
    """
    heads: dict[Aggregate, int] = {}
    for row in kept:
        agg = (row["aggregate_type"], row["aggregate_id"])
        heads[agg] = min(heads.get(agg, row["id"]), row["id"])
    waiting = await waiting_behind(session, dialect, heads)
    return [
        row["id"] for row in kept if (row["aggregate_type"], row["aggregate_id"]) not in waiting
    ]


async def waiting_behind(
    session: AsyncSession, dialect: str, heads: Mapping[Aggregate, int]
) -> set[Aggregate]:
    """The aggregates of ``heads`` (aggregate -> its chain's first id) that have an
    unpublished row below that id."""
    if dialect == "postgresql":
        # One index probe per aggregate (``_WAITING_PG``): the same question asked with
        # two ANY lists used the index on the type alone and walked every row of that type
        # below the highest head, 6 ms a claim at first and 100 ms once 40,000 rows had
        # been shipped, while the consumers' own writes competed for the same cores.
        found = await session.execute(
            _WAITING_PG,
            {
                "h_type": [agg[0] for agg in heads],
                "h_id": [agg[1] for agg in heads],
                "h_head": list(heads.values()),
            },
        )
        return {(agg_type, agg_id) for agg_type, agg_id in found}
    ahead = await session.execute(
        select(t.c.id, t.c.aggregate_type, t.c.aggregate_id).where(
            one_of(dialect, t.c.aggregate_type, sorted({agg[0] for agg in heads})),
            one_of(dialect, t.c.aggregate_id, sorted({agg[1] for agg in heads})),
            status_in(*UNPUBLISHED),
            t.c.id < max(heads.values()),
        )
    )
    return {
        (agg_type, agg_id)
        for row_id, agg_type, agg_id in ahead
        if row_id < heads.get((agg_type, agg_id), -1)
    }


def _waiting_pg() -> Select[str, str]:
    """``waiting_behind`` on PostgreSQL: the heads as arrays, ``unnest``ed, each joined LATERAL to
    its aggregate's first unpublished row below the head (``LIMIT 1`` keeps it a probe of
    ``ix_outbox_event_aggregate`` per aggregate)."""
    head = (
        func.unnest(
            bindparam("h_type", type_=postgresql.ARRAY(t.c.aggregate_type.type)),
            bindparam("h_id", type_=postgresql.ARRAY(t.c.aggregate_id.type)),
            bindparam("h_head", type_=postgresql.ARRAY(t.c.id.type)),
        )
        .table_valued("aggregate_type", "aggregate_id", "head")
        .render_derived()
    )
    earlier = (
        select(t.c.id)
        .where(
            t.c.aggregate_type == head.c.aggregate_type,
            t.c.aggregate_id == head.c.aggregate_id,
            t.c.id < head.c.head,
            status_in(*UNPUBLISHED),
        )
        .limit(1)
        .lateral()
    )
    return select(head.c.aggregate_type, head.c.aggregate_id).select_from(
        head.join(earlier, true())
    )


_WAITING_PG = _waiting_pg()


@dataclass
class Floor:
    """Below which id every row was published or dead at the last scan.

    Scanning from there skips the published rows at the head of the table, and with them
    the index entries their earlier versions left (``PENDING``, ``PROCESSING``) until
    vacuum removes them: without it every claim walked those of every row shipped so far.
    A row below the floor becomes unpublished again only when an operator re-queues it, or
    when it commits after later rows (the limit above): every ``REFRESH_SECONDS`` the scan
    starts from the beginning again.
    """

    id: int = 0
    since: float = field(default_factory=time.monotonic)

    REFRESH_SECONDS: ClassVar[float] = 10.0

    def start(self) -> int:
        """The id to scan from (0: from the beginning, now and then)."""
        if time.monotonic() - self.since > self.REFRESH_SECONDS:
            self.id, self.since = 0, time.monotonic()
        return self.id

    def saw(self, lowest: int | None) -> None:
        """The scan's lowest unpublished id (None: it found none: keep the floor)."""
        if lowest is not None:
            self.id = lowest


async def _scan(
    session: AsyncSession,
    planner: Planner,
    page: int,
    floor: Floor,
    held: Mapping[int, Aggregate],
) -> None:
    """Feed ``planner`` every unpublished row from ``floor`` on in id order, a page of
    ``PENDING`` rows at a time (with the ``PROCESSING`` rows among them), until it is full
    or the rows run out. The caller's ``held`` rows are ``PROCESSING`` until it settles
    them: they are fed as the caller knows them, not read again (a relay with a backlog
    holds two cycles' rows at every claim; more than one lookup takes are read, then left
    out)."""
    start = floor.start()
    dialect = backend(session)
    query = select(*_SCAN_COLUMNS).where(status_in(_PROCESSING), t.c.id >= start)
    if held and len(held) <= list_size(dialect):  # else read, and left out below
        query = query.where(not_(one_of(dialect, t.c.id, sorted(held))))
    read = [_seen(row) for row in await session.execute(query.order_by(t.c.id))]
    processing = sorted(
        [
            *(row for row in read if row.id not in held),
            *(Seen(i, agg, _PROCESSING, None, None) for i, agg in held.items() if i >= start),
        ]
    )
    after = start - 1
    lowest: int | None = processing[0].id if processing else None
    for _ in range(MAX_SCAN_PAGES):
        query = select(*_SCAN_COLUMNS).where(status_in(_PENDING), t.c.id > after)
        excluded = sorted(planner.blocked)[:MAX_EXCLUDED]
        if excluded:
            query = query.where(*_leave_out(dialect, excluded))
        pending = [_seen(row) for row in await session.execute(query.order_by(t.c.id).limit(page))]
        if pending and after == start - 1:
            lowest = min(pending[0].id, lowest if lowest is not None else pending[0].id)
            floor.saw(lowest)
        elif lowest is not None and after == start - 1:
            floor.saw(lowest)
        last = pending[-1].id if len(pending) == page else None
        mine = [row for row in processing if last is None or row.id <= last]
        processing = processing[len(mine) :]
        planner.feed(sorted([*pending, *mine], key=lambda row: row.id))
        if last is None or planner.full:
            return
        after = last
    # Every page so far was rows that must wait (due later, or behind one that must): the
    # due rows further on that nothing unpublished precedes are taken, one per aggregate,
    # or a backlog waiting for its next attempt would hold back every other aggregate.
    heads = select(*_SCAN_COLUMNS).where(
        status_in(_PENDING),
        t.c.id > after,
        or_(t.c.next_retry_at.is_(None), t.c.next_retry_at <= planner.now),
        ~_EARLIER_UNPUBLISHED,
    )
    found = [_seen(row) for row in await session.execute(heads.order_by(t.c.id).limit(page))]
    # With the PROCESSING rows not fed yet: a dead relay's, whose lease expired, are taken.
    planner.feed(sorted([*found, *processing], key=lambda row: row.id))


def _earlier_unpublished() -> ColumnElement[bool]:
    """An unpublished row of the same aggregate before the outer query's row."""
    earlier = t.alias("earlier")
    return exists().where(
        earlier.c.aggregate_type == t.c.aggregate_type,
        earlier.c.aggregate_id == t.c.aggregate_id,
        earlier.c.id < t.c.id,
        earlier.c.status.in_(UNPUBLISHED),
    )


_EARLIER_UNPUBLISHED = _earlier_unpublished()


def _leave_out(dialect: str, aggregates: Sequence[Aggregate]) -> list[ColumnElement[bool]]:
    """Conditions leaving ``aggregates`` out of a scan's page: per aggregate type, its ids as
    one list (``aggregate_id = ANY``, looked up in a hash). A list of ``(type, id)`` row
    values was an OR of every pair tested on every row read: 40-60 ms a page on
    PostgreSQL with 500 aggregates left out, longer than the rest of the claim."""
    ids_by_type: dict[str, list[str]] = {}
    for agg_type, agg_id in aggregates:
        ids_by_type.setdefault(agg_type, []).append(agg_id)
    return [
        not_(and_(t.c.aggregate_type == agg_type, one_of(dialect, t.c.aggregate_id, ids)))
        for agg_type, ids in ids_by_type.items()
    ]
