"""Build the faust app and its one agent."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import faust

from app.registry import Registry
from app.runtime.acks import withhold
from app.runtime.records import to_record
from app.runtime.services import Services, start_services
from app.settings import Settings

log = logging.getLogger("effectively_once.worker")


def create_app(settings: Settings, registry: Registry) -> faust.App:
    """The faust app consuming ``ORDER_TOPIC`` in batches through the pipeline."""
    # faust keeps per-app files here; off the working directory, one folder per app id.
    datadir = Path(tempfile.gettempdir()) / "effectively-once"
    datadir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        settings.app_id,
        broker=settings.broker_url,
        broker_session_timeout=settings.broker_session_timeout_seconds,
        broker_heartbeat_interval=min(3.0, settings.broker_session_timeout_seconds / 3),
        consumer_auto_offset_reset="earliest",
        topic_partitions=settings.order_topic_partitions,
        store="memory://",
        datadir=str(datadir / settings.app_id),
        web_enabled=True,
    )
    topic = app.topic(
        settings.order_topic,
        partitions=settings.order_topic_partitions,
        key_serializer="raw",
        value_serializer="raw",
        # Declared at start when missing (with ORDER_TOPIC_PARTITIONS); an existing topic
        # is left as it is.
        internal=True,
    )
    holder: dict[str, Services] = {}

    @app.agent(topic, name="effectively-once")
    async def consume(stream: Any) -> None:
        services = holder.get("services")
        if services is None:
            services = holder["services"] = await start_services(settings, registry)
        processor = services.processor
        async for events in stream.take_events(
            settings.batch_size, within=settings.batch_wait_seconds
        ):
            try:
                outcomes = await processor.process([to_record(e) for e in events])
            except BaseException:
                # Stopping, or a bug: what was not committed must not be acked.
                withhold(events)
                raise
            log.debug("batch of %d: %d outcomes", len(events), len(outcomes))
            # Leaving the loop body lets faust ack the batch: only now, after the commit.

    @app.on_before_shutdown.connect  # type: ignore[arg-type]
    async def _close(app: Any, **_: Any) -> None:
        services = holder.pop("services", None)
        if services is not None:
            await services.close()

    return app
