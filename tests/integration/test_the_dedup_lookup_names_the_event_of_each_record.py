"""The dedup lookup says which event each of its records is of, on every backend.

Contract: ``ConsumerStore.seen_event_ids`` gives, for each asked eventId this consumer
applied or parked, the aggregate type, aggregate id and version its record names
(``recorded_as``), exactly as written: non-ASCII ids and a trailing space kept (MariaDB's
binary columns come back through the lookup's union as bytes), an unversioned event's
version ``None``; ids nobody recorded, and other consumers' records, are not in it. The
batch tells a reused eventId from a duplicate by it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.db.engine import create_engine, session_factory
from app.pipeline.store import ConsumerStore

pytestmark = pytest.mark.integration

AT = datetime(2026, 1, 1, tzinfo=UTC)
CONSUMER = "points"


@pytest.fixture(params=["postgresql", "mariadb", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def consumed(event_id: str, agg_id: str, version: int | None, consumer: str = CONSUMER) -> dict:  # type: ignore[type-arg]
    return {
        "consumer_group": consumer,
        "event_id": event_id,
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": agg_id,
        "aggregate_version": version,
        "applied_at": AT,
    }


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(database_url, pool_size=1)
    async with eng.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
        await conn.execute(
            insert(tables.consumed_event),
            [
                consumed("e-1", "größe-1 ", 3),
                consumed("e-2", "o-2", None),
                consumed("e-9", "o-9", 1, consumer="audit"),
            ],
        )
        await conn.execute(
            insert(tables.parked_event),
            [
                {
                    "consumer_group": CONSUMER,
                    "event_id": "e-3",
                    "aggregate_type": "Customer",
                    "aggregate_id": "c-3",
                    "aggregate_version": 7,
                    "event_type": "OrderPaid",
                    "topic": "orders",
                    "partition": 0,
                    "offset": 5,
                    "record_key": b"c-3",
                    "record_value": b"{}",
                    "record_headers": "[]",
                    "parked_at": AT,
                }
            ],
        )
    yield eng
    await eng.dispose()


@pytest.mark.parametrize("parked_of", [[], [("Order", "größe-1 ")]])
async def test_each_record_names_its_event(
    engine: AsyncEngine, parked_of: list[tuple[str, str]]
) -> None:
    async with session_factory(engine)() as session, session.begin():
        store = ConsumerStore(session, CONSUMER)
        seen = await store.seen_event_ids(
            ["e-1", "e-2", "e-3", "e-9", "nobody"], parked_of=parked_of
        )

    assert seen.consumed == {"e-1", "e-2"} and seen.parked == {"e-3"}
    assert seen.recorded_as == {
        "e-1": ("Order", "größe-1 ", 3),
        "e-2": ("Order", "o-2", None),
        "e-3": ("Customer", "c-3", 7),
    }
