"""What a worker builds once at start: handlers, schema, engine, processor."""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.engine import create_engine, dialect_name, session_factory
from app.errors import ConfigurationError
from app.pipeline.pause import Backoff, retry_in_place
from app.pipeline.processor import BatchProcessor
from app.pipeline.publish import Publisher
from app.pipeline.route import FailureRouter
from app.registry import Registry, default_registry
from app.settings import Settings
from dlq.policy import RetryPolicy

log = logging.getLogger("effectively_once.worker")


def import_handlers(settings: Settings, registry: Registry = default_registry) -> Registry:
    """Import the handler modules so their ``@handler``s register; at least one consumer needed."""
    for name in settings.handler_module_names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise ConfigurationError(f"HANDLER_MODULES: cannot import {name!r}: {exc}") from exc
    if not registry.consumers:
        raise ConfigurationError(
            f"no @handler registered by HANDLER_MODULES={settings.handler_modules!r}"
        )
    return registry


@dataclass
class Services:
    """The long-lived objects of one worker process."""

    settings: Settings
    engine: AsyncEngine
    processor: BatchProcessor

    async def close(self) -> None:
        """Release the database connections."""
        await self.engine.dispose()


async def start_services(settings: Settings, registry: Registry, publisher: Publisher) -> Services:
    """Migrate (unless disabled) and build the processor; waits for the database to answer."""
    backoff = Backoff(settings.infra_retry_initial_seconds, settings.infra_retry_max_seconds)
    if settings.migrate_on_start:
        from app.db.migrate import upgrade_to_head

        await retry_in_place(
            "schema migration",
            lambda: upgrade_to_head(settings.database_url),
            backoff,
            on_pause=metrics.record_pause,
        )
        metrics.record_resumed()
    engine = create_engine(settings.database_url, settings.db_pool_size)
    processor = BatchProcessor(
        sessions=session_factory(engine),
        registry=registry,
        router=FailureRouter(RetryPolicy(settings.order_topic, settings.retry_delay_seconds)),
        publisher=publisher,
        policy=settings.unseen_aggregate_policy,
        backoff=backoff,
        concurrent_consumers=dialect_name(settings.database_url) != "sqlite",
        on_pause=metrics.record_pause,
    )
    log.info("consumers: %s", ", ".join(registry.consumers))
    return Services(settings, engine, processor)
