"""What a worker builds once at start: handlers, schema, engine, processor, relay."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.engine import create_engine, dialect_name, dispose, session_factory
from app.db.identity import read_identity
from app.db.retention import Retention, keep_cleaning
from app.errors import ConfigurationError
from app.failure_detail import FailureDetailPolicy
from app.handler_modules import check_allowlist, import_handler_modules
from app.monitoring import pauses
from app.monitoring.readiness import Check
from app.outbox.runner import RelayRunner
from app.outbox.topics import TopicMaker
from app.pipeline.classify import is_infrastructure
from app.pipeline.pause import Backoff, retry_in_place
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.prefilter import Prefilter
from app.registry import Registry, default_registry
from app.scrub import said, scrub
from app.settings import Settings
from dlq.policy import RetryPolicy

log = logging.getLogger("effectively_once.worker")
# How long the start may wait for the consumers' connections (``open_ahead``).
OPEN_AHEAD_SECONDS = 10.0


def import_handlers(settings: Settings, registry: Registry = default_registry) -> Registry:
    """Import the handler modules so their ``@handler``s register; at least one consumer needed,
    and none registered from outside them (``app.handler_modules``).

    Returns the consumers the worker runs: those named by ``CONSUMERS``, else every one.
    """
    import_handler_modules(settings.handler_module_names)
    check_allowlist(registry, settings.handler_module_names)
    if not registry.consumers:
        raise ConfigurationError(
            f"no @handler registered by HANDLER_MODULES={settings.handler_modules!r}"
        )
    return registry.only(settings.consumer_names) if settings.consumer_names else registry


@dataclass
class Services:
    """The long-lived objects of one worker process."""

    settings: Settings
    engine: AsyncEngine
    processor: BatchProcessor
    prefilter: Prefilter | None = None
    relay: RelayRunner | None = None
    cleaner: asyncio.Task[None] | None = None
    prober: asyncio.Task[None] | None = None  # the prefilter's circuit, probed while open

    async def close(self) -> None:
        """Stop the relay (it hands back what it did not publish), release the connections."""
        for task in (self.cleaner, self.prober):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.relay is not None:
            await self.relay.stop()
        if self.prefilter is not None:
            await self.prefilter.close()
        await dispose(self.engine)


@dataclass
class Starting:
    """What a worker's start is doing (``start_services``), for ``/ready``: a worker whose
    start is not done (its schema not migrated, its database not answering) processes no
    batch, whatever partitions it holds."""

    step: str = "not begun (it begins as the consumer starts, once the broker answers)"
    paused: str | None = None  # why the step waits, while it does
    done: bool = False

    def at(self, step: str) -> None:
        """The start goes on to ``step``."""
        self.step, self.paused = step, None

    def on_pause(self, what: str, exc: BaseException, delay: float) -> None:
        """``OnPause`` of a start-up step: counted as any pause, and said by ``check``."""
        pauses.on_pause(what, exc, delay)
        self.paused = said(exc)

    def check(self) -> Check:
        """``/ready``'s ``start`` check."""
        if self.done:
            return Check("start", True, "done")
        waits = f"; waiting, it met {self.paused}" if self.paused else ""
        return Check("start", False, f"not done: {self.step}{waits}")


async def start_services(
    settings: Settings, registry: Registry, starting: Starting | None = None
) -> Services:
    """Migrate (unless disabled), build the processor and start the relay (``RELAY_ENABLED``);
    waits for the database to answer. ``starting`` follows each step."""
    starting = starting or Starting()
    backoff = Backoff(
        settings.infra_retry_initial_seconds,
        settings.infra_retry_max_seconds,
        settings.infra_retry_jitter,
    )
    if settings.migrate_on_start:
        from app.db.migrate import upgrade_to_head

        starting.at("migrating the schema")
        await retry_in_place(
            "schema migration",
            lambda: upgrade_to_head(settings.database_url, settings.handler_module_names),
            backoff,
            on_pause=starting.on_pause,
        )
        pauses.resumed()
    engine = create_engine(settings.database_url, settings.db_pool_size, settings.db_timeouts)
    prefilter = None
    if settings.redis_url:
        starting.at("reading the database's identity")
        identity = await retry_in_place(
            "reading the database's identity",
            lambda: _identity(engine),
            backoff,
            on_pause=starting.on_pause,
        )
        pauses.resumed()
        prefilter = build_prefilter(settings, identity)
    relay_pauses = pauses.Outside("relay")
    relay = (
        RelayRunner(settings, on_pause=relay_pauses.on_pause, on_progress=relay_pauses.resumed)
        if settings.relay_enabled
        else None
    )
    processor = BatchProcessor(
        sessions=session_factory(engine),
        registry=registry,
        router=FailureRouter(
            RetryPolicy(settings.order_topic, settings.retry_delay_seconds),
            detail=FailureDetailPolicy.of(settings),
            app_id=settings.app_id,
        ),
        app_id=settings.app_id,
        on_outbox=relay.wake if relay is not None else None,
        policy=settings.unseen_aggregate_policy,
        default_aggregate_type=settings.default_aggregate_type,
        backoff=backoff,
        concurrent_consumers=dialect_name(settings.database_url) != "sqlite",
        on_pause=pauses.on_pause,
        prefilter=prefilter,
        escalate_after=settings.escalate_after_attempts,
        handler_timeout=settings.handler_timeout_seconds or None,
    )
    log.info(
        "consumers: %s; Redis prefilter %s",
        ", ".join(registry.consumers),
        "on" if prefilter else "off (REDIS_URL unset)",
    )
    warn_if_the_example_runs(settings)
    starting.at("declaring the topics the handlers emit to")
    if relay is not None:
        await relay.declare(registry.emitted_topics)
        relay.start()
    else:
        await declare_topics(settings, registry.emitted_topics)
        log.warning(
            "RELAY_ENABLED=false: this worker's outbox rows (retry and DLT records, emitted "
            "events) wait for a relay of their own (python -m app relay)"
        )
    # After the relay started: a database slow to answer delays the first batch's
    # connections, never the relay's rows. A start cancelled meanwhile (SIGTERM) stops
    # the relay it started: nobody else holds it yet.
    starting.at("opening the consumers' database connections")
    try:
        await open_ahead(processor)
    except BaseException:
        if relay is not None:
            await relay.stop()
        raise
    cleaner = None
    if settings.cleanup_interval.total_seconds() > 0:
        cleaner = asyncio.ensure_future(
            keep_cleaning(engine, Retention.of(settings), settings.cleanup_interval.total_seconds())
        )
    prober = asyncio.ensure_future(prefilter.keep_probing()) if prefilter is not None else None
    return Services(settings, engine, processor, prefilter, relay, cleaner, prober)


async def open_ahead(processor: BatchProcessor) -> None:
    """The consumers' connections opened, and their batches' reads run once, before the first
    batch (``app.pipeline.warm``). A database that does not answer now is the first batch's
    to meet (it pauses and retries in place, and ``/ready`` says why): here one line says
    that the connections were not opened ahead, and the worker goes on."""
    try:
        async with asyncio.timeout(OPEN_AHEAD_SECONDS):
            await processor.warm_up()
    except Exception as exc:
        log.warning(
            "the consumers' database connections were not opened ahead of the first batch "
            "(it opens them itself): %s: %s",
            type(exc).__name__,
            scrub(str(exc)) or f"no answer within {OPEN_AHEAD_SECONDS:.0f}s",
        )


def warn_if_the_example_runs(settings: Settings) -> None:
    """A worker started without ``HANDLER_MODULES`` runs the bundled example consumers: say so,
    for a team that forgot to name its own package."""
    if "handler_modules" not in settings.model_fields_set:
        log.warning(
            "HANDLER_MODULES is not set: this worker runs the bundled example consumers "
            "(package %r) and writes their tables; set HANDLER_MODULES to your own package",
            settings.handler_modules,
        )


async def declare_topics(settings: Settings, topics: Collection[str]) -> None:
    """Without a relay here: create the topics the handlers emit to (``TOPICS_DECLARE``);
    a refusal or a broker out of reach is logged (the relay tries again on first use)."""
    if not topics or not settings.topics_declare:
        return
    try:
        refused = await TopicMaker.of(settings).create(topics)
    except Exception as exc:
        log.warning("could not declare the topics %s: %r", ", ".join(sorted(topics)), exc)
        return
    for topic, why in refused.items():
        log.error("topic %r does not exist and could not be created: %s", topic, why)


async def _identity(engine: AsyncEngine) -> str:
    try:
        return await read_identity(engine)
    except DBAPIError as exc:
        if is_infrastructure(exc):
            raise
        raise ConfigurationError(
            "the database has no framework tables (database_identity is missing): run "
            "python -m app.db.migrate, or start with MIGRATE_ON_START=true"
        ) from exc


def build_prefilter(settings: Settings, database_identity: str) -> Prefilter | None:
    """The Redis prefilter when ``REDIS_URL`` is set. Its keys are namespaced by the
    ``APP_ID`` and by the database's identity (``app.db.identity``): they never speak
    for another database."""
    if not settings.redis_url:
        return None
    prefilter = Prefilter.from_url(
        settings.redis_url,
        namespace=f"{settings.prefilter_key_prefix}:{settings.app_id}:{database_identity}",
        ttl_seconds=settings.prefilter_ttl_seconds,
        timeout_seconds=settings.prefilter_timeout_seconds,
        failure_threshold=settings.prefilter_failure_threshold,
        cooldown_seconds=settings.prefilter_cooldown_seconds,
        on_state_change=metrics.on_prefilter_circuit_change,
    )
    metrics.watch_prefilter(prefilter.counters)
    return prefilter
