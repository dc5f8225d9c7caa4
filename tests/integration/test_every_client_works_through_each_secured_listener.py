"""Every Kafka client works through each secured listener, with the settings alone.

Contract: against Apache Kafka's SASL_SSL listener (SCRAM-SHA-512), its SSL listener
(client certificates required; the client's key encrypted) and its SASL_PLAINTEXT
listener (PLAIN), with nothing changed but ``BROKER_URL`` and the ``BROKER_SECURITY_*``,
``BROKER_SASL_*`` and ``BROKER_SSL_*`` settings:

- a worker applies a small workload exactly (a duplicate included), its ``/ready``
  broker check connects, and its in-worker relay ships the dead letter of a poison
  record to the DLT;
- ``python -m dlq list`` reads that dead letter, and ``python -m app trace`` answers
  for an applied event;
- ``python -m app relay`` ships the rows an order service wrote to the outbox, each
  once, and stops cleanly on SIGTERM.

Each listener's port speaks only its own protocol, so no client here can have reached
the broker in plaintext (or without its login).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from app.demo.envelopes import Message
from app.demo.secure_kafka import LISTENERS, SecureKafka
from tests.integration.support.dlq import DlqCommand, dead_letters
from tests.integration.support.http import get_json
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.secured import run_app, secured_stream
from tests.integration.support.small_run import relay_ships_the_outbox
from tests.integration.support.state import Database, every_consumer
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration


@pytest.fixture(params=LISTENERS)
def listener(request: pytest.FixtureRequest) -> str:
    """The secured listener under test."""
    return str(request.param)


@pytest.fixture
def stream(secure_kafka: SecureKafka, listener: str) -> Stream:
    """The test's topic and group, the clients under test connecting through ``listener``."""
    return secured_stream(secure_kafka, listener)


async def test_worker_relay_dlq_and_trace_work_through_the_listener(
    secure_kafka: SecureKafka,
    listener: str,
    stream: Stream,
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    db: Database,
    tmp_path: Path,
) -> None:
    env = secure_kafka.settings(listener)
    alice, bob = Order("alice", 12_345), Order("bob", 5_099)
    a_created, a_paid, b_created, b_paid = alice.created(), alice.paid(), bob.created(), bob.paid()
    worker = workers.start(database_url, env=env)
    poison = Message(b"poison-key", b"not json at all")
    await topic.send([*messages(a_created, a_paid, a_paid, b_created, b_paid), poison])
    await topic.drained(workers=[worker])

    assert await db.balances() == {"alice": 123, "bob": 50}
    assert await db.consumed_counts() == every_consumer(4)
    _, ready = await get_json(worker, "/ready")
    assert ready["checks"]["broker"]["ok"], ready
    assert stream.broker_url.endswith(ready["checks"]["broker"]["detail"].split()[0]), ready
    # The poison's dead letter went out through the in-worker relay's producer.
    [dead] = await dead_letters(stream, 1, [worker])
    assert dead.value == poison.value

    dlq = DlqCommand(stream, database_url)
    listed = await dlq("list", "--json", env=env)
    assert listed.code == 0, listed
    assert [(row["reason"], row["position"]) for row in listed.json()] == [
        ("undecodable", f"{dead.partition}:{dead.offset}")
    ]
    traced = await run_app(
        "trace", a_paid["eventId"], "--json", env={**env, "DATABASE_URL": database_url}
    )
    assert traced.code == 0, traced
    states = {c["consumer"]: c["state"] for c in orjson.loads(traced.out)["consumers"]}
    assert states == dict.fromkeys(every_consumer(0), "applied")
    assert worker.stop() == 0

    await relay_ships_the_outbox(stream, database_url, tmp_path, env=env)
