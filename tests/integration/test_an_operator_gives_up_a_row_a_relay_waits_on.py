"""``outbox give-up --held`` frees a relay waiting in place on a row that will never go.

Contract: on Apache Kafka enforcing ACLs, a relay holding a row for a topic it may not
write waits in place (``PROCESSING``, its lease renewed) and ships nothing else meanwhile.
``give-up <id>`` leaves such a row alone and says ``--held`` gives it up anyway (before,
only ``not PENDING: a relay holds it``, and the only way out was to stop every relay);
``give-up <id> --held --execute`` makes it ``DEAD`` at once, the relay learns it at its
next lease renewal and sends nothing of it, and the rows it held back are published.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.acl_kafka import AclKafka
from app.outbox import NewEvent
from tests.integration.support.acls import USER, acl_stream, create_topics, grant
from tests.integration.support.dlq import records
from tests.integration.support.outbox import app_command, rows, write
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_a_row_a_relay_waits_on_is_given_up_and_the_rest_ship(
    acl_kafka: AclKafka, migrated_database: str, tmp_path: Path
) -> None:
    stream = acl_stream(acl_kafka)
    denied, allowed = f"{stream.topic}-other", stream.topic
    await create_topics(stream, [denied, allowed])
    grant(acl_kafka, "Write", [allowed])
    acl_kafka.grant(USER, "--operation", "IdempotentWrite", "--cluster")
    await write(migrated_database, [NewEvent(denied, "E", "Order", "o-0", {})])
    await write(migrated_database, [NewEvent(allowed, "E", "Order", f"o-{n}", {}) for n in (1, 2)])
    env = {
        **acl_kafka.settings(USER),
        "RELAY_LEASE_SECONDS": "3",
        "RELAY_BACKOFF_INITIAL_SECONDS": "0.1",
        "RELAY_BACKOFF_MAX_SECONDS": "0.2",
        "TOPICS_DECLARE": "false",
    }
    url = ("--database-url", migrated_database)
    relays = Relays(tmp_path / "relays")
    try:
        relays.start(migrated_database, stream.broker_url, env)
        found = await eventually(
            lambda: rows(migrated_database, "status"),
            lambda found: found[0]["status"] == "PROCESSING",
            what="the denied row held by the relay",
            within=60,
        )
        stuck = found[0]["id"]

        code, out, _ = await app_command("outbox", "give-up", str(stuck), "--why", "x", *url)
        assert code == 1 and "--held gives it up anyway" in out, out

        code, out, _ = await app_command(
            "outbox", "give-up", str(stuck), "--why", "wrong topic", "--held", "--execute", *url
        )
        assert code == 0 and f"gave up 1 of 1 row(s): {stuck}" in out, out
        final = await eventually(
            lambda: rows(migrated_database, "status", "last_error"),
            lambda found: [r["status"] for r in found] == ["DEAD", "PUBLISHED", "PUBLISHED"],
            what="the other rows published",
            within=60,
        )
    finally:
        relays.kill_all()

    assert "wrong topic" in final[0]["last_error"]
    assert await records(stream, denied) == []
    assert len(await records(stream, allowed)) == 2
