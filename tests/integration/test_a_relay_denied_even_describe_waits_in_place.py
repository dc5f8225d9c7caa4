"""A relay whose principal may not even Describe a topic waits in place for it.

Contract: on Apache Kafka enforcing ACLs, a standalone ``python -m app relay`` with
rows for a topic its principal has no ACL on at all (the broker leaves such a topic out
of every topic list it gives that principal, and refuses to describe it by name) counts
no attempt (the rows never ``DEAD``, with ``RELAY_MAX_ATTEMPTS=2``), and its ``/ready``
fails naming the write denied; once Write is granted, every row is published. Before,
the topic counted as missing: the relay tried to create it and its rows went ``DEAD``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.acl_kafka import AclKafka
from app.demo.broker import free_port
from app.outbox import NewEvent
from tests.integration.support.acls import USER, acl_stream, create_topics, grant
from tests.integration.support.http import get_json_at
from tests.integration.support.outbox import rows, write
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_a_topic_not_even_described_waits_in_place_until_granted(
    acl_kafka: AclKafka, migrated_database: str, tmp_path: Path
) -> None:
    stream = acl_stream(acl_kafka)
    topic = f"{stream.topic}-emitted"
    await create_topics(stream, [topic])
    acl_kafka.grant(USER, "--operation", "IdempotentWrite", "--cluster")
    await write(migrated_database, [NewEvent(topic, "E", "Order", f"o-{n}", {}) for n in range(3)])
    port = free_port()
    env = {
        **acl_kafka.settings(USER),
        "RELAY_METRICS_PORT": str(port),
        "RELAY_MAX_ATTEMPTS": "2",
        "RELAY_BACKOFF_INITIAL_SECONDS": "0.1",
        "RELAY_BACKOFF_MAX_SECONDS": "0.2",
        "TOPICS_DECLARE": "false",
    }
    relays = Relays(tmp_path / "relays")
    try:
        relays.start(migrated_database, stream.broker_url, env)
        _, body = await eventually(
            lambda: get_json_at(port, "/ready"),
            lambda got: got[0] == 503 and "not allowed to write" in str(got[1]),
            what="/ready naming the denied write",
            within=60,
        )
        assert f"not allowed to write {topic!r}" in body["checks"]["relay"]["detail"]
        statuses = {row["status"] for row in await rows(migrated_database, "status")}
        assert "DEAD" not in statuses and "PUBLISHED" not in statuses

        grant(acl_kafka, "Write", [topic])
        await eventually(
            lambda: rows(migrated_database, "status", "retry_count"),
            lambda found: all(r["status"] == "PUBLISHED" for r in found),
            what="every row published once Write is granted",
            within=60,
        )
        assert all(r["retry_count"] == 0 for r in await rows(migrated_database, "retry_count"))
    finally:
        relays.kill_all()
