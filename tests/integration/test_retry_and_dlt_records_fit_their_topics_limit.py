"""A retry or dead-letter record too large for its topic still gets there, shortened.

Contract: with every retry tier and the DLT created with a small ``max.message.bytes``
(room for the original record and a little more, not for the failure's stack trace, which
``FAILURE_DETAIL=full`` adds),
a payment whose handler keeps failing still travels main topic -> each tier -> DLT.
The broker refuses each framework record as too large once; the relay sends it again
at once without the stack trace (and the exception's message cut to 200 bytes), and
the original key, value and headers arrive untouched. No outbox row goes ``DEAD``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from app.outbox.message import LEFT_OUT
from dlq import headers as h
from dlq.topics import dlt_topic, retry_topic
from tests.integration.support.dlq import TRACE, a_payment_dies, records
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import statuses
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

# The original record with its trace header is about 400 bytes on the wire; the
# framework's headers with the stack trace take it over 2,000.
MAX_MESSAGE_BYTES = "1500"


@pytest.mark.parametrize("backend", ["postgresql"])
async def test_framework_records_are_shortened_to_fit(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stream = topic.stream
    small = [retry_topic(stream.topic, d) for d in (0.5, 1)] + [dlt_topic(stream.topic)]
    admin = AIOKafkaAdminClient(bootstrap_servers=stream.bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    name,
                    stream.partitions,
                    1,
                    topic_configs={"max.message.bytes": MAX_MESSAGE_BYTES},
                )
                for name in small
            ]
        )
    finally:
        await admin.close()

    death = await a_payment_dies(
        stream, workers, database_url, tmp_path / "fixed", env={"FAILURE_DETAIL": "full"}
    )

    original = next(
        r for r in await records(stream, stream.topic) if (r.partition, r.offset) == death.paid_at
    )
    tier_records = [r for name in small[:2] for r in await records(stream, name)]
    for record in [*tier_records, death.dead]:
        assert (record.key, record.value) == (original.key, original.value)
        assert record.headers[0] == TRACE
    dead = death.dead
    assert dead.header(h.DLT_EXCEPTION_STACKTRACE) == LEFT_OUT
    assert dead.header(h.DLT_REASON) == b"retries-exhausted"
    assert len(dead.header(h.DLT_EXCEPTION_MESSAGE) or b"") <= 200
    assert "DEAD" not in await statuses(database_url)
    assert "refused the record as too large" in death.worker.log()
