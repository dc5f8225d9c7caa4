"""The worker's web port: ``/metrics``, ``/health`` and ``/ready``; the parking sampler and
the watch of the database and the broker (``app.monitoring.watch``), which ask what
``/ready`` asks.

``create_app`` calls ``add_observability`` once; the agent reports each batch to
the ``Progress`` it returns. faust serves these pages next to its own on
``faust worker --web-port``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import faust
from aiokafka import TopicPartition as KafkaPartition
from faust.types import TP
from faust.web import Request, Response, View

from app import metrics
from app.kafka_clients import BrokerCheck, KafkaClients
from app.monitoring import readiness
from app.monitoring.check_engine import CheckEngine
from app.monitoring.parked import keep_sampling
from app.monitoring.progress import Progress, TopicPartition
from app.monitoring.watch import Watch, keep_watching
from app.registry import Registry
from app.runtime.membership import Membership
from app.runtime.positions import faust_consumer, known_position
from app.runtime.tier_check import StrandedTiers
from app.settings import Settings

log = logging.getLogger("effectively_once.web")

# Lag is read at scrape time; a consumer thread that does not answer in time is skipped.
LAG_TIMEOUT_SECONDS = 1.0


class FaustPartitions:
    """``PartitionSource`` over faust's consumer, limited to the topics the agents consume."""

    def __init__(self, app: faust.App) -> None:
        self._app = app

    def assignment(self) -> set[TopicPartition]:
        """Assigned partitions of acking topics (not faust's own leader topic)."""
        topics = self._app.topics
        return {
            (tp.topic, tp.partition)
            for tp in self._app.consumer.assignment()
            if topics.acks_enabled_for(tp.topic)
        }

    def topics(self) -> list[str]:
        """The topics the agents consume (not faust's own leader topic)."""
        return sorted(self._app.topics.acking_topics)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark faust's consumer last saw, if any."""
        try:
            return self._app.consumer.highwater(TP(*tp))
        except Exception:  # revoked since ``assignment`` or not fetched yet
            return None

    async def position(self, tp: TopicPartition) -> int | None:
        """The consumer's position in ``tp`` now, None while it has none: never faust's
        ``consumer.position()``, which can wait forever (``app.runtime.positions``)."""
        consumer = faust_consumer(self._app)
        if consumer is None:
            return None
        return known_position(consumer, KafkaPartition(*tp))

    def committed(self, tp: TopicPartition) -> int | None:
        """The committed offset faust's consumer keeps for ``tp`` (set by its commits and
        by the seek of each assignment), if any."""
        committed: Any = getattr(self._app.consumer, "_committed_offset", {})
        offset = committed.get(TP(*tp))
        return offset if isinstance(offset, int) else None


def add_observability(
    app: faust.App,
    settings: Settings,
    registry: Registry,
    clients: KafkaClients,
    relay_health: Callable[[], readiness.Check | None] = lambda: None,
    start_health: Callable[[], readiness.Check] | None = None,
) -> Progress:
    """Serve the three pages, sample parking every 10 s; returns the agent's ``Progress``.

    ``clients`` makes the broker check's connection (the worker's own settings);
    ``relay_health`` is the in-worker relay's check (None while it does not run);
    ``start_health`` says whether the worker's start (migrations, connections) is done."""
    progress = Progress()
    database = CheckEngine(settings.database_url, settings.db_timeouts)
    partitions = FaustPartitions(app)
    broker_check = BrokerCheck(clients, partitions.topics)
    tiers = StrandedTiers(clients, settings)
    metrics.initialise(registry.consumers)

    @app.page("/metrics")
    class Metrics(View):
        async def get(self, request: Request) -> Response:
            source = partitions if _assigned(partitions) is not None else None
            try:
                async with asyncio.timeout(LAG_TIMEOUT_SECONDS):
                    await progress.publish(source)
            except Exception as exc:  # a scrape never fails because lag could not be read
                log.debug("lag not refreshed: %r", exc)
            body, content_type = metrics.render()
            return self.bytes(body, headers={"Content-Type": content_type})

    @app.page("/health")
    class Health(View):
        async def get(self, request: Request) -> Response:
            return self.json({"status": "alive"})

    async def records_waiting() -> int | None:
        if not _assigned(partitions):
            progress.unassigned()
            return None
        try:
            async with asyncio.timeout(LAG_TIMEOUT_SECONDS):
                lag = await progress.lag(partitions)
        except Exception:  # the consumer did not answer in time: nothing to judge by
            return None
        return progress.records_waiting(lag)

    instance = settings.group_instance_id
    membership = Membership(instance).watch() if instance else None

    @app.page("/ready")
    class Ready(View):
        async def get(self, request: Request) -> Response:
            db, broker, waiting = await asyncio.gather(
                readiness.database(database.engine),
                readiness.broker(broker_check),
                records_waiting(),
            )
            stalled = readiness.progress(
                waiting,
                progress.stalled_for(),
                progress.since_last_batch(),
                settings.ready_stall_seconds,
                progress.completed_any,
            )
            settled = app.rebalancing_count > 0 and not app.rebalancing
            assigned = readiness.partitions(
                _assigned(partitions), settled, broker_check.missing_topics
            )
            relay = relay_health()
            if relay is None and not settings.relay_enabled:
                relay = await readiness.outbox(database.engine, settings.relay_stall_seconds)
            start = [start_health()] if start_health is not None else []
            more = [relay] if relay is not None else []
            member = [membership.check()] if membership is not None else []
            checks = (db, broker, *start, assigned, stalled, tiers.check(), *member, *more)
            report = readiness.Readiness(checks)
            return self.json(report.body(), status=200 if report.ok else 503)

    @app.task
    async def _look_for_stranded_tiers() -> None:
        await tiers.keep_looking()

    @app.task
    async def _sample_parking() -> None:
        await keep_sampling(database.engine)

    @app.task
    async def _watch() -> None:
        await keep_watching(
            [
                Watch("database", lambda: readiness.database(database.engine)),
                Watch("broker", lambda: readiness.broker(broker_check)),
            ]
        )

    @app.on_before_shutdown.connect  # type: ignore[arg-type]
    async def _dispose(app: Any, **_: Any) -> None:
        broker_check.close()
        await database.dispose()

    return progress


def _assigned(partitions: FaustPartitions) -> int | None:
    try:
        return len(partitions.assignment())
    except Exception:  # faust's ConsumerNotStarted before the consumer runs
        return None
