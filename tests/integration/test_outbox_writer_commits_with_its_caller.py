"""The outbox writer's rows commit and roll back with the caller's transaction.

Contract: ``add_events`` (async session) and ``add_events_sync`` (sync session, as
many order services have) insert into the caller's transaction and nothing else:
rolled back with it, no row; committed with it, one row per event, carrying the
envelope consumers read (the returned eventId, a UUIDv7 unless the caller gave one,
the aggregate and its version) as its payload, ``PENDING``. On each database.
"""

from __future__ import annotations

import uuid

import orjson
import pytest
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from app.db.engine import create_engine, session_factory
from app.outbox import NewEvent, add_events, add_events_sync
from tests.integration.support.databases import BACKENDS
from tests.integration.support.outbox import rows

pytestmark = pytest.mark.integration

SYNC_DRIVERS = {"sqlite": "sqlite", "postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql"}


class CallerGaveUp(Exception):
    """The caller's own reason to roll back."""


def paid(order: str, version: int) -> NewEvent:
    return NewEvent("orders", "OrderPaid", "Order", order, {"orderId": order}, version)


def check_committed(found: list[dict[str, object]], ids: list[str], order: str) -> None:
    assert [r["event_id"] for r in found] == ids
    for row, version in zip(found, (1, 2), strict=True):
        envelope = orjson.loads(str(row["payload"]))
        assert envelope["eventId"] == row["event_id"]
        assert (envelope["aggregateId"], envelope["aggregateVersion"]) == (order, version)
        assert row["status"] == "PENDING"
        assert uuid.UUID(str(row["event_id"])).version == 7


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_async_writer_commits_and_rolls_back_with_its_caller(
    migrated_database: str,
) -> None:
    sessions = session_factory(engine := create_engine(migrated_database, pool_size=1))
    try:
        with pytest.raises(CallerGaveUp):
            async with sessions() as session, session.begin():
                await add_events(session, [paid("order-1", 1)])
                raise CallerGaveUp
        assert await rows(migrated_database) == []

        async with sessions() as session, session.begin():
            ids = await add_events(session, [paid("order-2", 1), paid("order-2", 2)])
    finally:
        await engine.dispose()
    check_committed(await rows(migrated_database, "event_id", "payload", "status"), ids, "order-2")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_sync_writer_commits_and_rolls_back_with_its_caller(
    migrated_database: str,
) -> None:
    url = make_url(migrated_database)
    engine = create_sync_engine(url.set(drivername=SYNC_DRIVERS[url.get_backend_name()]))
    try:
        with pytest.raises(CallerGaveUp), Session(engine) as session, session.begin():
            add_events_sync(session, [paid("order-1", 1)])
            raise CallerGaveUp
        with Session(engine) as session, session.begin():
            ids = add_events_sync(session, [paid("order-3", 1), paid("order-3", 2)])
    finally:
        engine.dispose()
    check_committed(await rows(migrated_database, "event_id", "payload", "status"), ids, "order-3")
