"""Retry tiers the worker no longer reads, with records of its deployment still in them.

A retry tier is a topic named from ``ORDER_TOPIC`` and a delay (``orders.retry.30s``),
read only while its delay is in ``RETRY_DELAYS`` (or ``RETRY_DELAYS_RETIRED``). A
deployment whose ``RETRY_DELAYS`` changed while events waited in a tier would leave them
there: neither applied nor on the DLT, and neither ``dlq replay`` nor ``dlq skip`` can
reach them. The worker looks at start, and again every ``LOOK_EVERY_SECONDS`` (a tier is
left unread when a replica that read it stops, long after this one started): in each tier
of its topic on the broker that neither it nor any other member of its group reads (a
replica of another release, in a rolling deploy, reads tiers of its own), the records
past its group's committed offsets (from the start where it committed none) that name
its ``APP_ID`` (``dlt-app-id``; one naming none counts too, as the worker would take it:
another deployment's records are its own business). ``/ready`` then fails on ``retry
tiers``, naming each tier, how many of its records wait there and the setting that
reads them; the log says it once. A look reads at most ``LOOK_LIMIT`` records a tier.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from app.kafka_clients import KafkaClients
from app.monitoring.readiness import Check
from app.settings import Settings
from dlq.headers import DLT_APP_ID
from dlq.topics import RETRY_INFIX, delay_seconds, retry_topic

log = logging.getLogger("effectively_once.worker")

LOOK_EVERY_SECONDS = 60.0
LOOK_TIMEOUT_SECONDS = 30.0
LOOK_LIMIT = 10_000
NAME = "retry tiers"


def of_deployment(headers: Iterable[tuple[str, bytes]], app_id: str) -> bool:
    """Whether a record with ``headers`` is this deployment's (or names none)."""
    for name, value in headers:
        if name == DLT_APP_ID:
            return value == app_id.encode()
    return True


class GroupUnsettled(Exception):
    """The group is rebalancing (or its coordinator refused): the broker says which topics
    its members read only while it is stable, so the look tells nothing this time."""


def subscribed(groups: Iterable[Any]) -> set[str]:
    """The topics the members of ``groups`` (``DescribeGroups`` answers) subscribe to;
    ``GroupUnsettled`` while a group is not stable (its members' metadata left out) or
    the answer is an error."""
    topics: set[str] = set()
    for answer in groups:
        for group in answer.to_object()["groups"]:
            if group["error_code"] or group["state"] not in ("Stable", "Empty", "Dead"):
                raise GroupUnsettled(f"{group['state']} (error {group['error_code']})")
            for member in group["members"]:
                if member["member_metadata"]:
                    metadata = ConsumerProtocolMemberMetadata.decode(member["member_metadata"])
                    topics.update(metadata.subscription)
    return topics


def read_tiers(settings: Settings) -> set[str]:
    """The retry tiers the worker reads: ``RETRY_DELAYS``' and ``RETRY_DELAYS_RETIRED``'."""
    return {retry_topic(settings.order_topic, d) for d in settings.read_retry_delay_seconds}


@dataclass
class StrandedTiers:
    """What the last look found (``found``), and ``/ready``'s check of it."""

    clients: KafkaClients
    settings: Settings
    found: dict[str, int] = field(default_factory=dict)
    # Per partition of a tier, what earlier looks read: up to which offset, and the offsets
    # of this deployment's records among them (a tier another deployment reads, where
    # none are ours, is read once, not up to ``LOOK_LIMIT`` records at every look).
    _read: dict[TopicPartition, tuple[int, list[int]]] = field(default_factory=dict)

    async def look(self) -> dict[str, int]:
        """One look at the broker: the stranded tiers and how many of this deployment's
        records wait in each."""
        base, read = self.settings.order_topic, read_tiers(self.settings)
        admin = self.clients.admin()
        await admin.start()
        try:
            others = sorted(
                t for t in await admin.list_topics() if t.startswith(base + RETRY_INFIX)
            )
            others = [topic for topic in others if topic not in read]
            if others:  # a tier another member of the group reads is not left
                groups = await admin.describe_consumer_groups([self.settings.app_id])
                others = [topic for topic in others if topic not in subscribed(groups)]
            described = await admin.describe_topics(others) if others else []
            parts_of = {
                topic["topic"]: [
                    TopicPartition(topic["topic"], part["partition"])
                    for part in topic["partitions"]
                ]
                for topic in described
            }
            every = [tp for parts in parts_of.values() for tp in parts]
            committed = await self._committed(admin, every) if every else {}
        finally:
            await admin.close()
        if not every:
            return {}
        consumer = self.clients.consumer(enable_auto_commit=False)
        await consumer.start()
        try:
            found = {}
            for topic, parts in parts_of.items():
                waiting = await self._waiting(consumer, parts, committed) if parts else 0
                if waiting:
                    found[topic] = waiting
            return found
        finally:
            await consumer.stop()

    async def _waiting(
        self, consumer: Any, parts: list[TopicPartition], committed: dict[TopicPartition, int]
    ) -> int:
        """How many of this deployment's records of ``parts`` lie past the group's
        ``committed`` offsets; what earlier looks read is not read again, and a look reads
        at most ``LOOK_LIMIT`` records."""
        ends = await consumer.end_offsets(parts)
        starts = await consumer.beginning_offsets(parts)
        todo = {}
        for tp in parts:
            first = max(starts[tp], committed.get(tp, 0))
            read_to, ours = self._read.get(tp, (first, []))
            if read_to > ends[tp]:  # the topic was made again: its offsets start over
                read_to, ours = first, []
            read_to = max(read_to, first)
            self._read[tp] = (read_to, [offset for offset in ours if offset >= first])
            if ends[tp] > read_to:
                todo[tp] = read_to
        if todo:
            await self._read_on(consumer, todo, ends)
        return sum(len(self._read[tp][1]) for tp in parts)

    async def _read_on(
        self, consumer: Any, todo: dict[TopicPartition, int], ends: dict[TopicPartition, int]
    ) -> None:
        """Read each partition of ``todo`` from its offset towards its end, noting this
        deployment's records and how far it read."""
        consumer.assign(list(todo))
        for tp, offset in todo.items():
            consumer.seek(tp, offset)
        seen = 0
        while todo and seen < LOOK_LIMIT:
            batches = await consumer.getmany(*todo, timeout_ms=1_000)
            if not batches:
                break
            for tp, records in batches.items():
                read_to, ours = self._read[tp]
                for record in records:
                    if record.offset < ends[tp]:
                        seen += 1
                        read_to = record.offset + 1
                        if of_deployment(record.headers, self.settings.app_id):
                            ours.append(record.offset)
                self._read[tp] = (read_to, ours)
                if not records or read_to >= ends[tp]:
                    todo.pop(tp, None)

    async def _committed(
        self, admin: Any, parts: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``parts`` (left out: none committed)."""
        offsets = await admin.list_consumer_group_offsets(self.settings.app_id, partitions=parts)
        return {tp: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}

    async def keep_looking(self, every: float = LOOK_EVERY_SECONDS) -> None:
        """``look`` at start, then every ``every`` seconds; a look that fails (the broker
        away: its own check says so) leaves the last finding."""
        while True:
            try:
                async with asyncio.timeout(LOOK_TIMEOUT_SECONDS):
                    found = await self.look()
            except Exception as exc:
                log.debug("could not look for retry tiers left unread: %r", exc)
            else:
                self._tell(found)
            await asyncio.sleep(every)

    def _tell(self, found: dict[str, int]) -> None:
        """Keep ``found``; log it when it changed (an ERROR while some wait)."""
        before, self.found = self.found, found
        if found and found != before:
            log.error("%s", self.check().detail)
        elif before and not found:
            log.info("the retry tiers left unread are empty now")

    def check(self) -> Check:
        """``/ready``'s ``retry tiers``: failed while a look found records left unread."""
        if not self.found:
            return Check(NAME, True, "every retry tier with this group's records is read")
        tiers = ", ".join(f"{topic} ({count} record(s))" for topic, count in self.found.items())
        delays = ",".join(_seconds(topic) for topic in self.found)
        return Check(
            NAME,
            False,
            f"records of this group wait in retry tiers RETRY_DELAYS no longer names: {tiers}; "
            f"nothing reads them: set RETRY_DELAYS_RETIRED={delays} (in seconds) until they are "
            "through, or put the delays back in RETRY_DELAYS",
        )


def _seconds(tier: str) -> str:
    """The delay of ``tier`` in seconds, as ``RETRY_DELAYS`` writes it."""
    delay = delay_seconds(tier.rpartition(RETRY_INFIX)[2])
    return "?" if delay is None else f"{delay:g}"
