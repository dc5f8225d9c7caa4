"""/ready is red until the worker's start is done: its schema migrated, its relay running.

Contract: a worker joins its group as faust starts it, and migrates its schema as its
first agent starts; a migration that waits (here: another worker holds the migration
lock) holds back every batch. Meanwhile ``/ready`` answers 503 with ``start`` the one
failed check, saying the start migrates the schema, although the database answers and
partitions are assigned; once the migration is done it answers 200. (``/ready`` answered
200 while the schema was not migrated yet, and a worker waiting for a database created
later looked ready for as long.)
"""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.db.migrate import _PG_LOCK_KEY
from tests.integration.support.http import get_json, readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def test_ready_is_red_while_the_schema_waits_to_be_migrated(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    url = make_url(database_url)
    holder = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        async with holder.transaction():
            # Another worker migrating: the lock is held until this transaction ends.
            await holder.execute("SELECT pg_advisory_xact_lock($1)", _PG_LOCK_KEY)
            worker = workers.start(database_url)

            async def probe() -> tuple[int, dict]:
                return await get_json(worker, "/ready")

            status, body = await eventually(
                probe,
                lambda answer: answer[1]["checks"]["partitions"]["ok"],
                what="the worker's partitions to be assigned",
                within=60,
                workers=[worker],
            )
            assert status == 503, body
            assert body["failed"] == ["start"], body
            assert "migrating the schema" in body["checks"]["start"]["detail"], body
            assert body["checks"]["database"]["ok"], body
    finally:
        await holder.close()

    body = await readiness_is(worker, 200, within=60)
    assert body["checks"]["start"] == {"ok": True, "detail": "done"}
    assert worker.alive
