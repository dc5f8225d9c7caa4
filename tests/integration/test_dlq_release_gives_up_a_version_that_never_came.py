"""`python -m dlq release` gives up a version that never came; the parked successors apply.

Contract: a consumer that took version 1 of an aggregate and then version 3 parks 3
while 2 is missing. ``release --consumer C --aggregate <type>:<id>`` names the gap (last
applied 1, parked from 3) and the version it would give up, changing nothing; with
``--execute`` it publishes one skip record for version 2 to the parked event's
partition, saying who gave it up and why (``--by``, ``--why``), and, without ``APP_ID``,
a note that the records name no deployment: the consumer takes
version 2 without a handler and applies the parked 3, once. Released again, nothing
waits: exit code 1, nothing published. A skip record the broker does not take (the
parked event's partition is gone) is one line, exit code 2, and so is a consumer no row
of the database knows (a mistyped name).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from app.db.engine import create_engine
from app.db.tables import aggregate_version, parked_event
from app.demo.envelopes import encode
from dlq.given_up import GIVEN_UP
from tests.integration.support.dlq import (
    PROBE,
    PROBE_MODULES,
    DlqCommand,
    probe_env,
    produce,
    records,
)
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

WITHIN = 30


async def test_release_takes_the_missing_version_and_the_parked_one_applies(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    stream = topic.stream
    worker = workers.start(
        database_url, handler_modules=PROBE_MODULES, env=probe_env(tmp_path / "fixed")
    )
    alice = Order("alice", 12_345)
    await produce(stream, [encode(alice.created()), encode(alice.cancelled())])  # no version 2
    await eventually(
        db.parked_count, lambda n: n == 1, what="version 3 parked", within=WITHIN, workers=[worker]
    )
    dlq = DlqCommand(stream, database_url)
    aggregate = f"Order:{alice.order_id}"

    dry = await dlq("release", "--consumer", PROBE, "--aggregate", aggregate)
    assert dry.code == 0, dry.err
    assert "last applied version 1, 1 parked from version 3" in dry.out, dry.out
    assert "would give up version(s) 2; add --execute" in dry.out, dry.out
    assert await db.parked_count() == 1

    why = ("--by", "ops-anna", "--why", "deleted from the outbox by hand")
    done = await dlq("release", "--consumer", PROBE, "--aggregate", aggregate, "--execute", *why)
    assert done.code == 0, done.err
    assert "version 2: skip record published at" in done.out, done.out
    assert "as ops-anna (deleted from the outbox by hand)" in done.out, done.out
    assert "APP_ID is not set: the skip records name no deployment" in done.err, done.err
    balances = await eventually(
        db.balances,
        lambda b: "alice/cancelled" in b,
        what="the parked cancel to apply",
        within=WITHIN,
        workers=[worker],
    )
    assert balances == {"alice/cancelled": 1}
    assert await db.versions(alice.order_id) == {PROBE: 3}
    assert await db.parked_count() == 0

    again = await dlq("release", "--consumer", PROBE, "--aggregate", aggregate, "--execute")
    assert again.code == 1, again.out + again.err
    assert "nothing waits for a version" in again.out + again.err
    given_up = [r for r in await records(stream, stream.topic) if GIVEN_UP.encode() in r.value]
    assert len(given_up) == 1
    assert orjson.loads(given_up[0].value)["data"] == {
        "givenUpBy": "ops-anna",
        "why": "deleted from the outbox by hand",
    }


async def test_a_malformed_aggregate_is_a_usage_error(topic: OrderTopic, database_url: str) -> None:
    ran = await DlqCommand(topic.stream, database_url)(
        "release", "--consumer", PROBE, "--aggregate", "no-colon"
    )
    assert ran.code == 2, ran.out + ran.err
    assert "<aggregateType>:<aggregateId>" in ran.err
    assert "Traceback" not in ran.err


async def test_a_skip_record_the_broker_does_not_take_is_one_line(
    topic: OrderTopic, migrated_database: str
) -> None:
    now = datetime.now(UTC)
    engine = create_engine(migrated_database)
    async with engine.begin() as conn:
        await conn.execute(
            aggregate_version.insert().values(
                consumer_group=PROBE,
                aggregate_type="Order",
                aggregate_id="o-1",
                last_version=1,
                updated_at=now,
            )
        )
        await conn.execute(
            parked_event.insert().values(
                event_id="e-3",
                consumer_group=PROBE,
                aggregate_type="Order",
                aggregate_id="o-1",
                aggregate_version=3,
                event_type="OrderCancelled",
                topic=topic.stream.topic,
                partition=99,  # not a partition of the topic (any more)
                offset=7,
                record_key=b"o-1",
                record_value=b"{}",
                record_headers="[]",
                parked_at=now,
            )
        )
    await engine.dispose()

    ran = await DlqCommand(topic.stream, migrated_database)(
        "release", "--consumer", PROBE, "--aggregate", "Order:o-1", "--execute"
    )

    assert ran.code == 2, ran.out + ran.err
    assert (
        f"publishing the skip record of version 2 to {topic.stream.topic} partition 99 failed"
        in ran.err
    ), ran.err
    assert "Traceback" not in ran.err


async def test_a_consumer_nobody_knows_is_named_as_mistyped(
    topic: OrderTopic, migrated_database: str
) -> None:
    """It said "nope has no parked event", as of a consumer with nothing to release."""
    ran = await DlqCommand(topic.stream, migrated_database)(
        "release", "--consumer", "nope", "--aggregate", "Order:o-1"
    )
    assert ran.code == 2, ran.out + ran.err
    assert "--consumer 'nope': no consumer of that name" in ran.err
    assert "mistyped?" in ran.err
