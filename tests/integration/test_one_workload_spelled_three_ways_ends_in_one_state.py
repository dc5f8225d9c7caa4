"""One workload, sent with string ids, with integer ids, or as Debezium's outbox router
emits it, ends in the same balances and stock on every database.

Contract: the workload (orders with duplicates and swapped versions, ids the
numbers a producer's sequences give) sent through the real broker to a worker
on PostgreSQL, MariaDB or SQLite ends in exactly the state its events mean,
however it is spelled on the wire: every id a JSON string; every id a JSON
integer with the aggregate in the value or only in the key (raw or
JSON-quoted) and the aggregate type in the value or left to the default; or
the router's records (six value shapes, three header converters, event id,
type and aggregate type in headers for some orders). Nothing is parked,
nothing dead-lettered, each consumer has one dedup record per distinct event.
The fourth way, the real Debezium engine, is
``test_debezium_engine_records_apply_as_the_workload_means``.
"""

from __future__ import annotations

import pytest

from app.demo.spellings import Spelling, spell
from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database, expected_final_state, final_state
from tests.integration.support.workers import Workers
from tests.integration.support.workloads import producers_workload

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("spelling", list(Spelling))
@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_state_is_what_the_events_mean_however_they_are_spelled(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, spelling: Spelling
) -> None:
    workload = producers_workload()
    worker = workers.start(database_url)

    await topic.send(spell(workload, spelling))
    await topic.drained(workers=[worker])

    assert worker.alive
    assert await final_state(db) == expected_final_state(workload.expected)
