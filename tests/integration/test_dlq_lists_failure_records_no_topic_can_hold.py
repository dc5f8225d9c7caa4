"""An event whose retry or dead-letter record no topic can hold is still in ``dlq list``.

Contract: with the DLT (or the first retry tier) created with a ``max.message.bytes`` of
2,000 and a payment whose own record is larger, the record the worker writes for the
failed payment cannot be published, not even shortened: its outbox row goes ``DEAD``.
``python -m dlq list`` shows the event all the same, with the status ``unpublished``, the
broker's refusal and what to do, in the table and in ``--json``; ``show --event-id`` finds
it; the outbox sample counts it for the alert. ``skip --execute`` gives it up for its
consumer, so the cancel parked behind it applies, its ``failed_event`` row ends
``skipped``, and the ``DEAD`` row the skip stood in for is deleted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from app.db.engine import create_engine
from app.demo.envelopes import encode
from app.outbox.monitor import sample_outbox
from dlq.topics import dlt_topic, retry_topic
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE,
    PROBE_MODULES,
    TRACE,
    DlqCommand,
    failures,
    probe_env,
    produce,
)
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.outbox import rows
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

MAX_MESSAGE_BYTES = "2000"
PADDING = "x" * 3_000  # in the payment's own value: no shortening makes it fit
RELAY = {"RELAY_MAX_ATTEMPTS": "2", "RELAY_BACKOFF_INITIAL_SECONDS": "0.2"}


@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize("small", ["DLT", "retry"])
async def test_a_record_no_topic_can_hold_is_listed_and_skipped(
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    db: Database,
    tmp_path: Path,
    small: str,
) -> None:
    stream = topic.stream
    tight = dlt_topic(stream.topic) if small == "DLT" else retry_topic(stream.topic, 0.5)
    admin = AIOKafkaAdminClient(bootstrap_servers=stream.bootstrap)
    await admin.start()
    try:
        config = {"max.message.bytes": MAX_MESSAGE_BYTES}
        await admin.create_topics([NewTopic(tight, stream.partitions, 1, topic_configs=config)])
    finally:
        await admin.close()

    env = {**probe_env(tmp_path / "fixed"), **RELAY}
    worker = workers.start(database_url, handler_modules=PROBE_MODULES, env=env)
    alice, mallory = Order("alice", 12_345), Order(FAIL_USER, 5_000)
    paid, cancelled = mallory.paid(note=PADDING), mallory.cancelled()
    await produce(
        stream,
        [encode(e) for e in (alice.created(), alice.paid(), mallory.created(), paid, cancelled)],
        [TRACE],
    )
    event_id = str(paid["eventId"])

    def dead_record(found: list[dict[str, object]]) -> bool:
        return any(r["status"] == "DEAD" and r["topic"] == tight for r in found)

    outbox = await eventually(
        lambda: rows(database_url, "topic", "status", "last_error"),
        dead_record,
        what=f"the record for {tight} to go DEAD",
        within=60,
        workers=[worker],
    )
    (dead,) = [r for r in outbox if r["status"] == "DEAD"]
    assert "MessageSizeTooLarge" in str(dead["last_error"])
    assert await unpublished_gauge(database_url) == 1  # what the alert watches

    dlq = DlqCommand(stream, database_url, user="night-shift")
    listed = await dlq("list")
    assert listed.code == 0, listed.err
    line = next(line for line in listed.out.splitlines() if event_id in line)
    assert f"outbox:{dead['id']}" in line and PROBE in line and "unpublished" in line
    assert "too large" in listed.out and "max.message.bytes" in listed.out
    assert f"python -m app outbox requeue {dead['id']}" in listed.out

    (row,) = (await dlq("list", "--json", "--status", "unpublished")).json()
    assert row["status"] == "unpublished"
    assert (row["event_id"], row["consumer"]) == (event_id, PROBE)
    assert row["unpublished"]["outbox_id"] == dead["id"]
    assert row["unpublished"]["topic"] == tight
    assert "MessageSizeTooLarge" in row["unpublished"]["last_error"]

    shown = await dlq("show", "--event-id", event_id)
    assert shown.code == 0, shown.err
    assert "unpublished" in shown.out and PADDING[:100] in shown.out
    by_id = await dlq("show", f"outbox:{dead['id']}")
    assert by_id.code == 0 and PADDING[:100] in by_id.out, by_id.err
    typo = await dlq("show", "outbox:987654")
    assert typo.code == 1, typo.out + typo.err
    assert "no failure record at outbox:987654" in typo.err, typo.err

    done = await dlq("skip", "--event-id", event_id, "--execute", "--why", "too large to keep")
    assert done.code == 0, done.out + done.err
    assert "selected 1: skipped 1, left alone 0, errors 0" in done.out

    balances = await eventually(
        db.balances,
        lambda b: f"{FAIL_USER}/cancelled" in b,
        what="the parked cancel to apply",
        within=30,
        workers=[worker],
    )
    assert balances == {"alice": 123, f"{FAIL_USER}/cancelled": 1}
    assert await db.versions(mallory.order_id) == {PROBE: 3}
    (failure,) = await failures(database_url)
    assert (failure["status"], failure["decided_by"]) == ("skipped", "night-shift")
    assert dead["id"] not in [r["id"] for r in await rows(database_url)]
    after = await dlq("list", "--event-id", event_id)
    assert after.code == 1, after.out  # nothing left to list: no DLT record, no DEAD row
    assert await unpublished_gauge(database_url) == 0


async def unpublished_gauge(database_url: str) -> int:
    """``effectively_once_unpublished_failure_records`` as the next sample sets it."""
    engine = create_engine(database_url, pool_size=1)
    try:
        return (await sample_outbox(engine))[2]
    finally:
        await engine.dispose()
