"""For the tests on a broker that enforces ACLs: the test's stream on it, its topics, and
the ACLs a worker's principal gets.

The test's own clients (creating topics, producing, reading back) use the PLAINTEXT
listener, a super user's; the worker gets only ``worker``'s login on the SASL_PLAINTEXT
listener, and may do only what ``grant`` allowed.
"""

from __future__ import annotations

import uuid

from app.demo.acl_kafka import AclKafka
from app.demo.produce import ensure_topic
from dlq.topics import dlt_topic, retry_topic
from tests.integration.support.workers import Stream

PARTITIONS = 2
USER = "worker"


def acl_stream(kafka: AclKafka) -> Stream:
    """A topic and group of the test's own; ``BROKER_URL`` is the SASL_PLAINTEXT listener."""
    tag = uuid.uuid4().hex[:10]
    return Stream(
        broker_url=kafka.settings(USER)["BROKER_URL"],
        bootstrap=kafka.bootstrap,
        topic=f"orders-{tag}",
        app_id=f"eo-test-{tag}",
        partitions=PARTITIONS,
    )


def topics_of(stream: Stream, delays: tuple[float, ...]) -> tuple[list[str], str]:
    """The main topic and its retry tiers (what the worker reads), and the DLT."""
    return [stream.topic, *(retry_topic(stream.topic, d) for d in delays)], dlt_topic(stream.topic)


async def create_topics(stream: Stream, names: list[str]) -> None:
    """Create ``names`` as a super user (the worker may create none)."""
    for name in names:
        await ensure_topic(stream.bootstrap, name, stream.partitions)


def grant_reading(kafka: AclKafka, stream: Stream, topics: list[str]) -> None:
    """What a worker that writes nothing needs: Read and Describe on ``topics``, Read on its
    group, and an idempotent producer (IdempotentWrite on the cluster) for its relay."""
    kafka.grant(USER, "--consumer", *_topics(topics), "--group", stream.app_id)
    kafka.grant(USER, "--operation", "IdempotentWrite", "--cluster")


def _topics(names: list[str]) -> list[str]:
    return [arg for name in names for arg in ("--topic", name)]


def grant(kafka: AclKafka, operation: str, topics: list[str]) -> None:
    """Allow ``operation`` on each of ``topics``."""
    kafka.grant(USER, "--operation", operation, *_topics(topics))
