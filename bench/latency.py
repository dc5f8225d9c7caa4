"""End-to-end latency at a fixed offered load: producer hand-off to the consumer's commit.

A latency run has its own topic and a fresh workload (another seed, so other
event ids), produced at a steady rate below the maximum. For the framework,
into emptied tables, each event's latency is its ``consumed_event.applied_at``
(set when the row is built, just before the commit) minus the wall-clock time
the bench handed it to the producer; an event sent twice counts from its first
send. For the bare agent it is the event's age when the agent takes it.
All times come from the same machine's clock.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson
from aiokafka import AIOKafkaProducer

from app.demo.envelopes import Message
from app.demo.produce import ensure_topic
from app.demo.workload import Workload
from bench.scenarios import Framework, check, describe
from bench.session import Session
from bench.worker import WorkerConfig, worker_env
from bench.workload import SEED, make_workload, orders_for

LINGER_MS = 5
SLEEP_AT_LEAST_SECONDS = 0.002  # below this, send now rather than sleep


@dataclass(frozen=True)
class Latency:
    """Percentiles in milliseconds over every latency taken in the run (None: none taken)."""

    rate: float
    events: int
    p50_ms: float | None
    p99_ms: float | None
    correct: bool
    detail: str

    @classmethod
    def of(
        cls, rate: float, events: int, seconds: list[float], correct: bool, detail: str
    ) -> Latency:
        """The percentiles of ``seconds`` (one latency per applied event)."""
        ordered = sorted(seconds)
        p50, p99 = percentile(ordered, 50), percentile(ordered, 99)
        return cls(
            rate,
            events,
            None if p50 is None else p50 * 1000,
            None if p99 is None else p99 * 1000,
            correct and bool(ordered),
            detail if ordered else f"no latency measured; {detail}",
        )


async def framework_latency(session: Session, setup: Framework, rate: float) -> Latency:
    """Offer ``rate`` events/s to ``setup`` from emptied tables; check the result too."""
    await session.database.empty()

    def env(config: WorkerConfig) -> dict[str, str]:
        return worker_env(
            config,
            app_id=session.app_id(f"latency-{setup.name}"),
            database_url=session.database.sqlalchemy_url,
            consumers=setup.consumers,
        )

    workload, sent_at = await paced_run(session, setup.name, rate, env, "app")
    rows = await session.database.applied_at()
    seconds = [applied.timestamp() - sent_at[event_id] for _, event_id, applied in rows]
    verdict = await check(session, workload.expected, setup.consumers)
    return Latency.of(rate, len(workload.messages), seconds, verdict.ok, describe(verdict))


async def bare_latency(session: Session, rate: float) -> Latency:
    """The floor: the bare agent's latency, each event's age when the agent takes it.

    Measured against the record's Kafka timestamp, which the producer sets when
    the bench hands it the event, so duplicates count as separate events here.
    """
    path = session.workdir / "bare-latency.txt"

    def env(config: WorkerConfig) -> dict[str, str]:
        return {
            **worker_env(config, app_id=session.app_id("latency-bare")),
            "BARE_LATENCY_FILE": str(path),
        }

    workload, _ = await paced_run(session, "bare", rate, env, "bench.bare_app")
    seconds = [float(line) for line in path.read_text(encoding="ascii").split()]
    taken = len(seconds) >= len(workload.messages)
    detail = f"{len(seconds):,} of {len(workload.messages):,} events taken"
    return Latency.of(rate, len(workload.messages), seconds, taken, detail)


async def paced_run(
    session: Session,
    name: str,
    rate: float,
    env: Callable[[WorkerConfig], dict[str, str]],
    app_module: str,
) -> tuple[Workload, dict[str, float]]:
    """Start a worker on a fresh topic, offer it a fresh workload at ``rate``, wait for the end.

    Returns the workload and each eventId's first send time.
    """
    workload = make_workload(orders_for(rate * session.options.latency_seconds), seed=SEED + 1)
    topic = f"bench-latency-{name}-{session.tag}"
    await ensure_topic(session.broker.bootstrap, topic, session.config.partitions)
    sent_at: dict[str, float] = {}

    async def offer() -> None:
        sent_at.update(
            await produce_paced(session.broker.bootstrap, topic, workload.messages, rate)
        )

    await session.measure(
        session.worker(f"latency-{name}", env(session.on_topic(topic)), app_module),
        len(workload.messages),
        count_transactions=False,
        before_events=offer,
    )
    return workload, sent_at


async def produce_paced(
    bootstrap: str, topic: str, messages: Sequence[Message], rate: float
) -> dict[str, float]:
    """Send ``messages`` at ``rate`` per second; returns each eventId's first send time."""
    event_ids = [str(orjson.loads(m.value)["eventId"]) for m in messages]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=LINGER_MS)
    await producer.start()
    sent_at: dict[str, float] = {}
    try:
        deliveries = []
        start = time.monotonic()
        for index, (message, event_id) in enumerate(zip(messages, event_ids, strict=True)):
            delay = start + index / rate - time.monotonic()
            if delay > SLEEP_AT_LEAST_SECONDS:
                await asyncio.sleep(delay)
            sent_at.setdefault(event_id, time.time())
            deliveries.append(await producer.send(topic, value=message.value, key=message.key))
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()
    return sent_at


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile of ``ordered`` (ascending); None when empty."""
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
