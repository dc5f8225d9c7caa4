"""The ceiling: a faust app whose one agent takes the order topic's events and does nothing.

``python -m faust -A bench.bare_app worker`` with the framework worker's
environment (``BROKER_URL``, ``ORDER_TOPIC``, ``APP_ID``, ``BATCH_SIZE``,
``BATCH_WAIT_SECONDS``, ``BROKER_SESSION_TIMEOUT_SECONDS``, ``FETCH_MAX_WAIT_MS``,
``FETCH_MIN_BYTES``, ``GC_YOUNG_THRESHOLD``). Its consumer is the framework worker's
(``app.runtime.transport``: the fetch wait and size, the fetch loop, a partition's records
taken as soon as its stream buffer drains), its process is tuned like the worker's
(the garbage collector), and it takes the events in batches of ``BATCH_SIZE``
within ``BATCH_WAIT_SECONDS``, so the difference to the framework is what the
framework does with a batch: whatever the transport gains, the bare agent gains too.
``BARE_ITERATION=each`` iterates event by event instead. With
``BARE_LATENCY_FILE`` set (the bench's latency run) it appends each event's
age, now minus its Kafka record timestamp, to that file: the floor under the
framework's latency.

It keeps faust's data directory in its working directory (faust's default).
The bench reads progress from faust's own monitor (``APP_WEB_STATS_ENABLED``),
exactly as it does for the framework worker.
"""

from __future__ import annotations

import os
import time
from typing import Any

import faust

from app.runtime.garbage import tune_garbage_collector
from app.runtime.transport import set_fetch
from app.settings import Settings

_app_id = os.environ.get("APP_ID", "bench-bare")
_session_timeout = float(os.environ.get("BROKER_SESSION_TIMEOUT_SECONDS", "10"))
_defaults = Settings.model_fields  # the framework worker's defaults
_batch_size = int(os.environ.get("BATCH_SIZE", _defaults["batch_size"].default))
_batch_wait = float(os.environ.get("BATCH_WAIT_SECONDS", _defaults["batch_wait_seconds"].default))
_each = os.environ.get("BARE_ITERATION", "batch") == "each"
_fetch_max_wait_ms = int(
    os.environ.get("FETCH_MAX_WAIT_MS", _defaults["fetch_max_wait_ms"].default)
)
_fetch_min_bytes = int(os.environ.get("FETCH_MIN_BYTES", _defaults["fetch_min_bytes"].default))
_gc_young_threshold = int(
    os.environ.get("GC_YOUNG_THRESHOLD", _defaults["gc_young_threshold"].default)
)
_latency_path = os.environ.get("BARE_LATENCY_FILE")
_latency_file = open(_latency_path, "a", encoding="ascii") if _latency_path else None

app = faust.App(
    _app_id,
    broker=os.environ.get("BROKER_URL", "kafka://localhost:9092"),
    broker_session_timeout=_session_timeout,
    broker_heartbeat_interval=min(3.0, _session_timeout / 3),
    consumer_auto_offset_reset="earliest",
    store="memory://",
    web_enabled=True,
)
set_fetch(app, _fetch_max_wait_ms, _fetch_min_bytes)
topic = app.topic(
    os.environ.get("ORDER_TOPIC", "order-event-topic"),
    key_serializer="raw",
    value_serializer="raw",
)


@app.on_worker_init.connect
def _tune(*_: Any, **__: Any) -> None:
    tune_garbage_collector(_gc_young_threshold)


@app.agent(topic, name="bare")
async def bare(stream: Any) -> None:
    """Take every event and drop it; faust acks each batch when the body returns."""
    if _each:
        async for event in stream.events():
            _note_latency([event])
        return
    async for events in stream.take_events(_batch_size, within=_batch_wait):
        _note_latency(events)


def _note_latency(events: list[Any]) -> None:
    """Append each event's age (now minus its record timestamp) to ``BARE_LATENCY_FILE``.

    Only the bench's latency run sets the variable; the throughput run does nothing here.
    """
    if _latency_file is None:
        return
    now = time.time()
    _latency_file.write("".join(f"{now - e.message.timestamp:.6f}\n" for e in events))
    _latency_file.flush()
