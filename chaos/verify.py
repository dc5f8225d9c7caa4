"""Read the end state back (database, order topic, DLT) and judge it.

Exact means: every balance, stock level, notification count and consumer's
``consumed_event`` count is what the good events mean; ``chaos-tally`` saw each
good event take effect exactly once; ``parked_event`` is empty; the only
``failed_event`` rows are the poison's; every ``outbox_event`` row (the workers' DLT
records) is published; and every poison record is on the DLT exactly once, with
nothing else there.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.tables import failed_event, outbox_event, parked_event
from app.demo.expected import CONSUMERS
from app.demo.progress import read_state
from app.demo.verdict import Verdict, compare
from app.kafka_clients import KafkaClients
from app.outbox.status import UNPUBLISHED, OutboxStatus
from app.records import RawRecord
from chaos import tally
from chaos.checks import (
    DeadLetterCheck,
    TallyCheck,
    TopicCount,
    check_dead_letters,
    check_tally,
    count_topic,
)
from chaos.workload import Workload
from dlq.broker import read_topic
from dlq.errors import NothingMatched
from dlq.topics import dlt_topic

EVERY_CONSUMER = (*CONSUMERS, tally.CONSUMER)


@dataclass(frozen=True)
class Findings:
    """Everything the soak checks at the end."""

    state: Verdict
    tally: TallyCheck
    parked: int
    failures: dict[str, int]  # "consumer status reason" -> failed_event rows
    outbox: dict[str, int]  # outbox_event rows by status
    dead_letters: DeadLetterCheck
    topic: TopicCount

    @property
    def other_failures(self) -> dict[str, int]:
        """``failed_event`` rows that are not the poison's (consumer ``''``, ``dead``)."""
        return {key: n for key, n in self.failures.items() if not key.startswith("(poison) dead")}

    @property
    def exact(self) -> bool:
        """The whole verdict."""
        return (
            self.state.ok
            and self.tally.ok
            and self.parked == 0
            and not self.other_failures
            and set(self.outbox) <= {OutboxStatus.PUBLISHED.value}
            and self.dead_letters.ok
        )


async def verify(database_url: str, broker_url: str, topic: str, workload: Workload) -> Findings:
    """Read the database and both topics; judge them against ``workload``."""
    state = await read_state(database_url)
    engine = create_engine(database_url, pool_size=1)
    try:
        tallies = await tally.tallies(engine)
        async with engine.connect() as conn:
            parked = int(await conn.scalar(select(func.count()).select_from(parked_event)) or 0)
            rows = (
                await conn.execute(
                    select(
                        failed_event.c.consumer_group,
                        failed_event.c.status,
                        failed_event.c.reason,
                        func.count(),
                    ).group_by(
                        failed_event.c.consumer_group, failed_event.c.status, failed_event.c.reason
                    )
                )
            ).all()
        outbox = await _outbox_statuses(engine)
        written = await _dead_letters_written(engine, dlt_topic(topic))
    finally:
        await engine.dispose()
    records = await read_topic(KafkaClients(broker_url), topic)
    dead = await _read_or_empty(broker_url, dlt_topic(topic))
    poison = workload.poison.keys()
    good = {
        str(json.loads(record.value)["eventId"])
        for record in workload.records
        if record.value not in poison
    }
    failures: Counter[str] = Counter()
    for consumer, status, reason, count in rows:
        failures[f"{consumer or '(poison)'} {status} {reason}"] += int(count)
    return Findings(
        state=compare(workload.expected, state, EVERY_CONSUMER),
        tally=check_tally(tallies, good),
        parked=parked,
        failures=dict(failures),
        outbox=outbox,
        dead_letters=check_dead_letters(records, dead, poison, written),
        topic=count_topic(records, poison),
    )


async def unpublished(database_url: str) -> int:
    """``outbox_event`` rows not published yet (``PENDING`` or ``PROCESSING``)."""
    engine = create_engine(database_url, pool_size=1)
    try:
        statuses = await _outbox_statuses(engine)
    finally:
        await engine.dispose()
    return sum(statuses.get(status.value, 0) for status in UNPUBLISHED)


async def _outbox_statuses(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(outbox_event.c.status, func.count()).group_by(outbox_event.c.status)
        )
        return {str(status): int(count) for status, count in rows}


async def _dead_letters_written(engine: AsyncEngine, dlt: str) -> Counter[str]:
    """Original position -> outbox rows the workers wrote for it to ``dlt``."""
    async with engine.connect() as conn:
        rows = await conn.execute(select(outbox_event.c.payload).where(outbox_event.c.topic == dlt))
        return Counter(str(json.loads(payload).get("original")) for (payload,) in rows)


async def _read_or_empty(broker_url: str, topic: str) -> list[RawRecord]:
    """The records of ``topic``; none when it does not exist (nothing was dead-lettered)."""
    try:
        return await read_topic(KafkaClients(broker_url), topic)
    except NothingMatched:
        return []
