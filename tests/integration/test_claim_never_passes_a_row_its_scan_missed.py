"""A claim never takes an aggregate's row while an earlier one is unpublished, even one
its scan missed.

Contract (``app.outbox.claim.claim``): the scan's statements each see their own moment,
so it can miss aggregate A's first row and plan A's chain from the second: another
relay claimed the first row (``PROCESSING`` under a live lease) and committed between
the scan's read of the ``PROCESSING`` rows and its read of the ``PENDING`` ones; or an
operator re-queued it (``DEAD`` to ``PENDING``) after the scan read it as dead. The
claim then returns no row of A, leaves them as they were, and claims aggregate B's
rows all the same. The other transaction commits at that moment through a connection
of its own; on SQLite, whose claim holds the write lock from its first statement (so
nothing can really change under it), the change is made in the claim's own
transaction. On each database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, event, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine, session_factory
from app.db.tables import outbox_event as t
from app.outbox import NewEvent
from app.outbox.claim import claim
from tests.integration.support.databases import BACKENDS
from tests.integration.support.outbox import rows, write

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
LIVE_LEASE = NOW + timedelta(minutes=5)
Change = Callable[[Connection], None]


def is_pending_page(statement: str, parameters: Any) -> bool:
    """The scan's read of ``PENDING`` rows (after its read of the ``PROCESSING`` ones)."""
    return statement.startswith("SELECT") and "status = 'PENDING'" in statement


def is_lock(statement: str, parameters: Any) -> bool:
    """The claim's lock: it reads the planned rows whole (the scan reads a few columns)."""
    return statement.startswith("SELECT") and "outbox_event.payload" in statement


@contextmanager
def committed_before(
    engine: AsyncEngine, other: AsyncEngine, step: Callable[[str, Any], bool], change: Change
) -> Iterator[None]:
    """Have ``change`` committed by another transaction right before the claim's first
    statement that ``step`` matches (SQLite: made in the claim's own transaction)."""
    done = False

    def before(conn: Connection, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        nonlocal done
        if done or not step(statement, parameters):
            return
        done = True
        if conn.dialect.name == "sqlite":
            change(conn)
        else:
            with other.sync_engine.begin() as elsewhere:
                change(elsewhere)

    event.listen(engine.sync_engine, "before_cursor_execute", before)
    try:
        yield
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", before)
    assert done, "the claim never reached the step the change was meant for"


def set_row(row_id: int, **values: Any) -> Change:
    def change(conn: Connection) -> None:
        conn.execute(update(t).where(t.c.id == row_id).values(**values))

    return change


def counted(aggregate: str, version: int) -> NewEvent:
    return NewEvent("orders", "Counted", "Counter", aggregate, {"n": version}, version)


# How the scan comes to see A's first row as published: (its status when the claim
# starts, the step before which another transaction changes it, the change).
MISSED = {
    "claimed-by-another-relay-between-the-scans-reads": (
        "PENDING",
        is_pending_page,
        {"status": "PROCESSING", "lease_owner": "other-relay", "lease_expires_at": LIVE_LEASE},
    ),
    "re-queued-after-the-scan": ("DEAD", is_lock, {"status": "PENDING", "retry_count": 0}),
}


@pytest.mark.parametrize("missed", MISSED)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_row_the_scan_missed_holds_back_its_aggregate(
    migrated_database: str, missed: str
) -> None:
    events = [counted(agg, v) for v in (1, 2) for agg in ("A", "B")]
    await write(migrated_database, events, per_transaction=len(events))
    ids: dict[str, list[int]] = {}  # aggregate -> its rows' ids in order
    for row in await rows(migrated_database, "aggregate_id"):
        ids.setdefault(row["aggregate_id"], []).append(row["id"])
    (a1, a2), (b1, b2) = ids["A"], ids["B"]
    first_status, step, values = MISSED[missed]
    engine = create_engine(migrated_database, pool_size=2)
    other = create_engine(migrated_database, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(update(t).where(t.c.id == a1).values(status=first_status))
        async with session_factory(engine)() as session, session.begin():
            with committed_before(engine, other, step, set_row(a1, **values)):
                claimed = await claim(
                    session, "this-relay", NOW, NOW + timedelta(seconds=60), limit=10
                )
    finally:
        await engine.dispose()
        await other.dispose()

    assert [(row["aggregate_id"], row["id"]) for row in claimed] == [
        ("B", b1),
        ("B", b2),
    ], "a row of A was claimed while A's first row was unpublished"
    after = {
        row["id"]: (row["status"], row["lease_owner"])
        for row in await rows(migrated_database, "status", "lease_owner")
    }
    assert after[a1] == (values["status"], values.get("lease_owner"))
    assert after[a2] == ("PENDING", None)
    assert after[b1] == after[b2] == ("PROCESSING", "this-relay")
