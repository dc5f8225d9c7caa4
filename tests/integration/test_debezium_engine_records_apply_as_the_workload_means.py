"""Records the real Debezium engine makes of outbox rows apply as the workload means.

Contract: the workload the spellings are tested with (``producers_workload``) inserted
as ``outbox_event`` rows into a ``wal_level=logical`` PostgreSQL, each event
in a transaction of its own, is turned into records by Debezium's embedded
engine (3.6, the real ``PostgresConnector`` and ``EventRouter``) running the
shipped ``ops/debezium`` configuration: half the rows through the initial
snapshot, the other half through the shipped publication's stream of inserts.
Each record is routed to the row's ``topic``, keyed by its aggregate id, its
value the payload text exactly as inserted, event id, type and aggregate type
in headers. Those bytes, forwarded unchanged to the broker (the workload's
duplicate sends as the same records again, as a connector re-emits after a
restart), end in exactly the balances, stock and dedup records the other
spellings end in (``test_one_workload_spelled_three_ways_ends_in_one_state``).
Rows of the framework's own workers in the same table (``aggregate_type``
``effectively-once``: retry and DLT records only the framework's relay may send)
make no record, neither through the snapshot nor through the stream.

Needs Java, the ``debezium`` extra and the logical cluster (``.ci/logical-postgres``):
skipped locally without them, failed under ``CI=true``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.demo.debezium import OutboxRow, outbox_row
from app.demo.envelopes import Message, decode
from app.outbox.status import RECORD_AGGREGATE_TYPE
from tests.conftest import unavailable
from tests.integration.support.debezium import (
    DebeziumUnavailable,
    Engine,
    Outbox,
    check_available,
)
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database, expected_final_state, final_state
from tests.integration.support.workers import Workers
from tests.integration.support.workloads import producers_workload

pytestmark = pytest.mark.integration

ENGINE_START_SECONDS = 180  # a cold JVM on a busy 2-core machine
STREAM_SECONDS = 90


async def test_the_engines_records_of_outbox_rows_apply_as_the_workload_means(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    try:
        check_available()
    except DebeziumUnavailable as exc:
        unavailable(str(exc))
    started = time.monotonic()
    workload = producers_workload()
    sent = [decode(message) for message in workload.messages]
    orders: dict[str, int] = {}
    rows: dict[str, OutboxRow] = {}
    duplicates: list[str] = []  # the eventIds the workload sends again
    for env in sent:
        order = orders.setdefault(env["aggregateId"], len(orders))
        if env["eventId"] in rows:
            duplicates.append(env["eventId"])
        rows.setdefault(env["eventId"], outbox_row(env, order))
    inserted = list(rows.values())
    half = len(inserted) // 2
    worker = workers.start(database_url)

    try:
        async with Outbox() as outbox:
            await outbox.insert(topic.stream.topic, [_own("snapshot"), *inserted[:half]])
            engine = Engine(outbox.engine_properties(), tmp_path / "debezium")
            await engine.start()
            try:
                await engine.until(half, within=ENGINE_START_SECONDS)
                await outbox.insert(topic.stream.topic, [_own("stream"), *inserted[half:]])
                emitted = await engine.until(len(inserted), within=STREAM_SECONDS)
            finally:
                await engine.stop()
    except DebeziumUnavailable as exc:
        unavailable(str(exc))

    assert {routed for routed, _ in emitted} == {topic.stream.topic}
    records = {_header(m, "id"): m for _, m in emitted}
    assert sorted(records) == sorted(rows)
    for event_id, row in rows.items():
        record = records[event_id]
        assert record.key == row.aggregate_id.encode()
        assert record.value == row.payload_text.encode()  # the payload column, verbatim
        assert _header(record, "eventType") == row.event_type
        assert _header(record, "aggregateType") == row.aggregate_type
    assert len(duplicates) == workload.duplicates > 0
    await topic.send([m for _, m in emitted] + [records[e] for e in duplicates])
    await topic.drained(workers=[worker])

    assert await final_state(db) == expected_final_state(workload.expected)
    print(f"Debezium engine test: {len(inserted)} rows, {time.monotonic() - started:.1f} s")


def _own(when: str) -> OutboxRow:
    """A row as a worker of this framework writes its DLT record into the outbox (inserted
    first: a record made of it would come before the last one awaited)."""
    return OutboxRow(
        f"dlt-{when}", RECORD_AGGREGATE_TYPE, "orders:0:7", "OrderPaid", None, {"reason": when}
    )


def _header(message: Message, name: str) -> str:
    return dict(message.headers)[name].decode()
