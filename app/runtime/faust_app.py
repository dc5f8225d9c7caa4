"""Build the faust app: the main topic's agent, one agent per retry tier, the DLT topic.

The retry and DLT records the pipeline routes are outbox rows; the relay (in this
process with ``RELAY_ENABLED``) publishes them with a producer of its own, not faust's.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import shutil
import tempfile
import warnings
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import faust
from faust.exceptions import AlreadyConfiguredWarning
from mode.supervisors import CrashingSupervisor

from app.errors import BatchGivenUp, ConfigurationError
from app.kafka_clients import KafkaClients
from app.logging_repeats import quiet_repeats
from app.logging_setup import worker_logging_options
from app.logging_streams import capture_standard_streams, capture_thread_exceptions
from app.monitoring.progress import Progress
from app.monitoring.readiness import Check
from app.outbox.topics import TopicMaker
from app.registry import Registry
from app.runtime import due
from app.runtime.ahead import Ahead
from app.runtime.assignor import PartitionAssignor
from app.runtime.batches import run_batches
from app.runtime.boot import WebFirst, refuse
from app.runtime.garbage import tune_garbage_collector
from app.runtime.inbox import Inbox
from app.runtime.intake import Intake
from app.runtime.services import Services, Starting, start_services
from app.runtime.transport import Transport, set_fetch
from app.runtime.web import add_observability
from app.settings import Settings
from dlq.topics import dlt_topic, retry_topic

log = logging.getLogger("effectively_once.worker")


def create_app(
    settings: Settings, registry: Registry, clients: KafkaClients | None = None
) -> faust.App:
    """The faust app consuming ``ORDER_TOPIC`` and its retry tiers in batches; its broker
    connection (and ``/ready``'s broker check) from ``clients``, by default the settings'."""
    clients = clients or KafkaClients.from_settings(settings)
    # faust makes its folders here (empty with the memory store): off the working
    # directory, one per process, removed at exit.
    datadir = tempfile.mkdtemp(prefix=f"effectively-once-{settings.app_id}-")
    atexit.register(shutil.rmtree, datadir, ignore_errors=True)
    app = App(
        settings.app_id,
        **clients.faust_options(),
        broker_session_timeout=settings.broker_session_timeout_seconds,
        broker_heartbeat_interval=min(3.0, settings.broker_session_timeout_seconds / 3),
        consumer_auto_offset_reset="earliest",
        topic_partitions=settings.order_topic_partitions,
        topic_replication_factor=settings.topic_replication_factor,
        # TOPICS_DECLARE=false: faust creates none of its topics either (nor uses the
        # leader topic it would create).
        topic_allow_declare=settings.topics_declare,
        topic_disable_leader=not settings.topics_declare,
        # Static membership: a member that restarts within the session timeout under the
        # same id takes its partitions back without a rebalance of the group.
        consumer_group_instance_id=settings.group_instance_id,
        store="memory://",
        PartitionAssignor=PartitionAssignor,
        datadir=datadir,
        web_enabled=True,
        **worker_logging_options(settings),
    )
    if settings.log_format == "json":
        app.on_worker_init.connect(capture_standard_streams)
    else:
        app.on_worker_init.connect(capture_thread_exceptions)
    app.on_worker_init.connect(quiet_repeats)
    app.broker_clients = clients
    app.inboxes = {}
    if settings.topics_declare:
        app.topics_first = _declarer(settings)
    set_fetch(app, settings.fetch_max_wait_ms, settings.fetch_min_bytes)
    services = _LazyServices(settings, registry, partial(refuse, app))
    progress = add_observability(
        app, settings, registry, clients, services.relay_health, services.starting.check
    )
    base = settings.order_topic
    _agent(app, _topic(app, settings, base), services, progress, "main", tier_delay=None)
    # The retired tiers too: nothing is routed to them, their records are still due.
    for delay in settings.read_retry_delay_seconds:
        name = retry_topic(base, delay)
        _agent(app, _topic(app, settings, name), services, progress, name, tier_delay=delay)
    # No agent reads the DLT, so faust would not create it: declared with the services,
    # before the first batch, so that dead letters land on a topic of the right shape.
    services.declare(_topic(app, settings, dlt_topic(base)))

    @app.on_before_shutdown.connect  # type: ignore[arg-type]
    async def _close(app: Any, **_: Any) -> None:
        await services.close()

    return app


class App(faust.App):
    """faust's app, with a member URL that a static member keeps across restarts, its web
    port up before it waits for the broker and its topics created before its consumer
    subscribes (``app.runtime.boot``), and our transport (``app.runtime.transport``)."""

    BootStrategy = WebFirst
    # Creates the consumed topics (TOPICS_DECLARE); None: faust's own declaration only.
    topics_first: Callable[[], Awaitable[None]] | None = None
    # Waited for before faust's clients connect (``broker_wait``); None: not waited for.
    broker_clients: KafkaClients | None = None
    # The agents' topics, whose records the fetch loop hands to their inboxes (``inbox``).
    inboxes: dict[str, Inbox]

    async def on_first_start(self) -> None:
        instance = self.conf.consumer_group_instance_id
        if instance:
            # faust's assignor requires the URL in the assignment the broker kept for a
            # static member to be the member's own; ``faust worker --web-port`` sets it
            # from the host and port, which a restart may change. (faust warns that the key
            # was read already, by the web server started first; the assignor reads it at
            # every assignment.)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AlreadyConfiguredWarning)
                self.conf.canonical_url = f"http://{instance}"  # type: ignore[assignment]
        await super().on_first_start()

    def _new_transport(self) -> Any:
        return Transport(self.conf.broker_consumer, self)

    def _new_producer_transport(self) -> Any:
        return Transport(self.conf.broker_producer, self)


def _declarer(settings: Settings) -> Callable[[], Awaitable[None]]:
    """Create the order topic, its retry tiers and its DLT before faust starts its consumer.

    faust declares each agent's topic as the agent starts, while its consumer already
    joins the group: on a fresh broker the group's first assignment can come before the
    broker lists a topic just created, and faust then ignores that topic (no partition
    of it assigned, nothing consumed) until a rebalance. Created and listed first, they
    are all there when the consumer subscribes."""
    base = settings.order_topic
    tiers = (retry_topic(base, d) for d in settings.read_retry_delay_seconds)
    names = [base, *tiers, dlt_topic(base)]

    async def declare() -> None:
        try:
            refused = await TopicMaker.of(settings, client_id=settings.app_id).create(names)
        except Exception as exc:  # faust declares them itself next, and says what fails
            log.warning("could not create the topics before start: %r", exc)
            return
        for topic, why in refused.items():
            log.error("the broker refused to create topic %r: %s", topic, why)

    return declare


def _topic(app: faust.App, settings: Settings, name: str) -> Any:
    return app.topic(
        name,
        partitions=settings.order_topic_partitions,
        key_serializer="raw",
        value_serializer="raw",
        # Declared at start when missing; an existing topic is left as it is.
        internal=True,
    )


def _agent(
    app: App,
    topic: Any,
    services: _LazyServices,
    progress: Progress,
    name: str,
    tier_delay: float | None,
) -> None:
    settings = services.settings

    async def consume(stream: Any) -> None:
        processor = (await services.get()).processor

        intake = Intake(stream, inbox)
        ahead = Ahead(processor.decoder() if processor.decodes_first else None)

        async def process(messages: list[Any]) -> None:
            records, decoded = ahead.take(messages)
            holds = partial(intake.holds, messages)
            try:
                if tier_delay is not None:
                    with progress.waiting_until_due(records[0].topic):
                        await due.wait_until_due(records, holds, tier_delay)
                outcomes = await progress.run(
                    partial(processor.process, decoded=decoded, holds=holds), records
                )
            except BatchGivenUp as given_up:
                log.info("%s: %s; left to the partitions' next owner", name, given_up)
                raise
            log.debug("%s: batch of %d, %d outcomes", name, len(messages), len(outcomes))

        # Acked batch by batch, only after process() returned: after the commit.
        await intake.start()
        await run_batches(
            intake,
            settings.batch_size,
            settings.batch_wait_seconds,
            process,
            _behind(app),
            ahead.prepare,
        )

    inbox = app.inboxes[topic.get_topic_name()] = Inbox(app.conf.stream_buffer_maxsize)

    # A crash (a bug, not an event's failure) stops the whole worker: restarting just
    # the agent would go on past the withheld batch, and a later commit could cover it.
    # The next owner of the partitions reads from the last commit instead.
    app.agent(topic, name=f"effectively-once:{name}", supervisor_strategy=CrashingSupervisor)(
        consume
    )


def _behind(app: faust.App) -> Callable[[Any], int]:
    """How many records the broker holds after ``message`` in its partition (0: unknown)."""

    def behind(message: Any) -> int:
        try:
            highwater = app.consumer.highwater(message.tp)
        except Exception:  # not assigned (any more): no backlog to speak of
            return 0
        return 0 if highwater is None else max(0, highwater - message.offset - 1)

    return behind


class _LazyServices:
    """Built by the first agent that runs (migrations need the event loop), shared by all.

    ``close`` (the worker stopping) does not wait for a start in progress, which may be
    waiting for the database: a start that ends after it closes what it built (the relay
    would otherwise run on, its rows ``PROCESSING``, until the process ended), and the
    agent waits for its cancellation, which the stop brings next."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        refuse: Callable[[ConfigurationError], None] | None = None,
    ) -> None:
        self.settings = settings
        self._registry = registry
        self._refuse = refuse
        self._lock = asyncio.Lock()
        self._services: Services | None = None
        self._undeclared: list[Any] = []
        self._closed = False
        self._refused = False
        self.starting = Starting()

    def declare(self, topic: Any) -> None:
        """Create ``topic`` (if missing) before the first batch is processed."""
        self._undeclared.append(topic)

    async def get(self) -> Services:
        async with self._lock:
            if self._closed or self._refused:
                await asyncio.Future()  # stopping: nothing is started any more
            if self._services is None:
                self.starting.at("declaring the dead-letter topic")
                for topic in self._undeclared:
                    await topic.maybe_declare()
                try:
                    services = await start_services(self.settings, self._registry, self.starting)
                except ConfigurationError as exc:
                    if self._refuse is None:
                        raise
                    # A mistake, not an outage: one line, and the worker stops (exit code 2).
                    self._refused = True
                    self.starting.at(f"refused: {exc}")
                    self._refuse(exc)
                    await asyncio.Future()  # until the stop cancels this agent
                if self._closed:
                    await services.close()
                    log.info("the worker is stopping: the services started meanwhile are closed")
                    await asyncio.Future()  # until the stop cancels this agent
                self._services = services
                self.starting.done = True
                # Start-up is over: what exists now lives as long as the worker.
                tune_garbage_collector(self.settings.gc_young_threshold)
            return self._services

    def relay_health(self) -> Check | None:
        """The in-worker relay's ``/ready`` check; None before start-up or without a relay."""
        if self._services is None or self._services.relay is None:
            return None
        return self._services.relay.health()

    async def close(self) -> None:
        self._closed = True
        if self._services is not None:
            await self._services.close()
            self._services = None
