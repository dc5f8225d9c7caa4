"""Topics the outbox writes to: created where missing, where the cluster allows it.

A handler's ``ctx.emit`` may name a topic nobody has created yet. Where this
service may create topics, it exists before the first row ships: the worker
declares the topics its handlers name (``@handler(..., emits=...)``) at start, and
the relay creates any other missing topic before its first publish to it, with
``ORDER_TOPIC_PARTITIONS`` partitions and ``TOPIC_REPLICATION_FACTOR`` replicas.
Where creation is refused (no permission, a policy, too few brokers), the broker's
reason is remembered: the relay's ``/ready`` check names the topic, and its rows
wait (retried with back-off) until someone creates it. A refused topic is asked for
again after ``ASK_AGAIN_SECONDS`` at the earliest. ``TOPICS_DECLARE=false``: nothing
is created, by the worker or the relay.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, for_code

from app.kafka_clients import KafkaClients
from app.settings import Settings

log = logging.getLogger("effectively_once.relay")
ASK_AGAIN_SECONDS = 30.0
LISTED_WITHIN_SECONDS = 10.0
_LISTED_POLL_SECONDS = 0.1


@dataclass
class TopicMaker:
    """Creates the topics the outbox needs; remembers the ones the broker refused."""

    clients: KafkaClients
    partitions: int
    replication: int
    client_id: str = "effectively-once-topics"
    request_timeout_seconds: float = 15.0
    # topic -> (the broker's reason, when it said so: monotonic)
    _refused: dict[str, tuple[str, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings, client_id: str = "effectively-once-topics") -> TopicMaker:
        """The maker ``settings`` ask for: partitions and replicas from the settings."""
        return cls(
            KafkaClients.from_settings(settings),
            settings.order_topic_partitions,
            settings.topic_replication_factor,
            client_id=client_id,
        )

    def refused(self, topic: str) -> str | None:
        """Why the broker refused to create ``topic`` the last time it was asked, or None."""
        found = self._refused.get(topic)
        return found[0] if found else None

    async def create(self, topics: Collection[str]) -> dict[str, str]:
        """Create those of ``topics`` the broker does not have; returns the ones it refused,
        each with its reason. Returns once the created ones are listed (or after
        ``LISTED_WITHIN_SECONDS``). Raises aiokafka's or the OS's error when the broker
        cannot be reached."""
        now = time.monotonic()
        recent: dict[str, str] = {}  # refused a moment ago: not asked again yet
        for topic in topics:
            found = self._refused.get(topic)
            if found and now - found[1] < ASK_AGAIN_SECONDS:
                recent[topic] = found[0]
        wanted = set(topics) - set(recent)
        if not wanted:
            return recent
        admin = self.clients.admin(
            client_id=self.client_id,
            request_timeout_ms=int(self.request_timeout_seconds * 1000),
        )
        await admin.start()
        try:
            missing = wanted - set(await admin.list_topics())
            refused = await self._create(admin, missing) if missing else {}
            await _until_listed(admin, missing - set(refused))
        finally:
            await admin.close()
        for topic in wanted:
            if topic in refused:
                self._refused[topic] = (refused[topic], time.monotonic())
            else:
                self._refused.pop(topic, None)
        return {**recent, **refused}

    async def _create(self, admin: AIOKafkaAdminClient, topics: set[str]) -> dict[str, str]:
        response = await admin.create_topics(
            [NewTopic(topic, self.partitions, self.replication) for topic in sorted(topics)]
        )
        refused = {}
        for topic, code, message in response.topic_errors:
            if code == 0:
                log.info(
                    "created topic %r (%d partition(s), replication %d)",
                    topic,
                    self.partitions,
                    self.replication,
                )
            elif code != TopicAlreadyExistsError.errno:  # created meanwhile by someone else
                name = for_code(code).__name__
                refused[topic] = f"{name}: {message}" if message else name
                log.error("the broker refused to create topic %r: %s", topic, refused[topic])
        return refused


async def _until_listed(admin: AIOKafkaAdminClient, topics: set[str]) -> None:
    """Wait until the broker lists ``topics``, so that a producer asking next finds them."""
    deadline = time.monotonic() + LISTED_WITHIN_SECONDS
    for _ in range(int(LISTED_WITHIN_SECONDS / _LISTED_POLL_SECONDS)):
        if not topics - set(await admin.list_topics()) or time.monotonic() > deadline:
            return
        await asyncio.sleep(_LISTED_POLL_SECONDS)
