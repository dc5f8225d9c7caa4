"""Every metric of effectively-once, defined here and nowhere else.

Names follow the Prometheus conventions: ``effectively_once_`` prefix,
``_total`` for counters, ``_seconds`` for durations. They live in their own
``REGISTRY`` (with the process and platform collectors), served on
``/metrics`` by the worker. The runtime calls one recording function per
batch (``record_outcomes``); everything else is set by the periodic samplers
or by the stage that knows (prefilter, retry routing, pauses).

Label values are bounded: ``consumer`` is a registered consumer (``""`` for
poison, no consumer's), ``event_type`` a known eventType or ``other`` (``""`` for
poison that names none), ``outcome`` a ``Kind``, ``tier`` a retry tier's name
(``5s``), ``reason`` a ``dlt-reason``, ``dependency`` one of ``DEPENDENCIES``.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from app.pipeline.outcomes import REPLAYED, Kind, Outcome
from app.prefilter.stage import SKIPPED as PREFILTER_SKIPPED
from dlq.policy import DeadReason
from dlq.topics import RETRY_INFIX
from schemas.registry import is_known_event_type

# ``_created`` twins of every counter only add noise to a scrape.
disable_created_metrics()

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

DEPENDENCIES = ("database", "broker", "redis", "other")  # see app.monitoring.pauses
DUPLICATE_SOURCES = ("database", "prefilter")

# --- events and batches -------------------------------------------------------------------
EVENTS = Counter(
    "effectively_once_events_total",
    "Events processed, by consumer, outcome and eventType (poison: consumer '').",
    ["consumer", "outcome", "event_type"],
    registry=REGISTRY,
)
BATCH_DURATION = Histogram(
    "effectively_once_batch_duration_seconds",
    "Time from a batch handed to the pipeline until every consumer committed it.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
BATCH_SIZE = Histogram(
    "effectively_once_batch_size",
    "Records per batch handed to the pipeline.",
    buckets=(1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000),
    registry=REGISTRY,
)
CONSUMER_BATCH_DURATION = Histogram(
    "effectively_once_consumer_batch_duration_seconds",
    "One consumer's transaction over a batch (dedup, gate, handlers, commit).",
    ["consumer"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
BATCH_RERUNS = Counter(
    "effectively_once_batch_reruns_total",
    "A consumer's batch rolled back and run again: 'conflict' (another worker wrote one of "
    "its aggregates or events meanwhile), 'handler-failed' (again, one savepoint per event) "
    "or 'escalated' (event by event after the database kept cancelling one of its "
    "statements, or the batch kept meeting a conflict).",
    ["consumer", "reason"],
    registry=REGISTRY,
)
DUPLICATES = Counter(
    "effectively_once_duplicates_total",
    "Duplicates caught, by consumer and by who caught them (database dedup record or prefilter).",
    ["consumer", "source"],
    registry=REGISTRY,
)


# --- prefilter (Redis) ---------------------------------------------------------------------
class PrefilterTotals(Protocol):
    """The running totals a ``Prefilter`` keeps (``app.prefilter.prefilter.PrefilterCounters``)."""

    lookups: int
    hits: int
    remembered: int
    errors: int
    short_circuits: int


_PREFILTER_TOTALS = (
    ("lookups", "Event ids the Redis prefilter answered for (hit or miss)."),
    ("hits", "Looked-up event ids Redis knew: duplicates that skipped the database."),
    ("remembered", "Event ids written to Redis after their commit."),
    ("errors", "Prefilter calls that failed or timed out (the database decided instead)."),
    ("short_circuits", "Prefilter calls not made because the circuit was open."),
)


class _PrefilterCollector(Collector):
    """Reads the prefilter's own running totals at scrape time (zeros without a prefilter)."""

    def __init__(self) -> None:
        self.totals: PrefilterTotals | None = None

    def collect(self) -> Iterable[Metric]:
        for name, help_text in _PREFILTER_TOTALS:
            value = getattr(self.totals, name, 0) if self.totals is not None else 0
            yield CounterMetricFamily(f"effectively_once_prefilter_{name}", help_text, value)


_PREFILTER = _PrefilterCollector()
REGISTRY.register(_PREFILTER)
PREFILTER_CIRCUIT_OPEN = Gauge(
    "effectively_once_prefilter_circuit_open",
    "1 while the prefilter's circuit breaker is not closed (Redis bypassed), else 0.",
    registry=REGISTRY,
)

# --- samples of the database (parking, the outbox) ---------------------------------------------
SAMPLED_AT = Gauge(
    "effectively_once_sampled_timestamp_seconds",
    "Unix time of the last sample of the database that succeeded, by sample ('parking', "
    "'outbox'): while it is old (the database out of reach), the sample's gauges keep "
    "their last values, or 0 if none succeeded yet.",
    ["sample"],
    registry=REGISTRY,
)
PARKED_EVENTS = Gauge(
    "effectively_once_parked_events",
    "Events waiting in parked_event for an earlier version of their aggregate.",
    ["consumer"],
    registry=REGISTRY,
)
PARKED_AGGREGATES = Gauge(
    "effectively_once_parked_aggregates",
    "Aggregates with at least one parked event.",
    ["consumer"],
    registry=REGISTRY,
)
OLDEST_PARKED_AGE = Gauge(
    "effectively_once_oldest_parked_event_age_seconds",
    "Age of the consumer's oldest parked event (0 when none).",
    ["consumer"],
    registry=REGISTRY,
)

# --- failures: retry tiers, dead letters, replays -----------------------------------------
RETRIES = Counter(
    "effectively_once_retries_total",
    "Events sent to a retry tier, by consumer and tier (the tier's delay, e.g. 5s).",
    ["consumer", "tier"],
    registry=REGISTRY,
)
DLT_RECORDS = Counter(
    "effectively_once_dlt_records_total",
    "Records sent to the dead-letter topic, by consumer and dlt-reason.",
    ["consumer", "reason"],
    registry=REGISTRY,
)
REPLAYS = Counter(
    "effectively_once_replays_total",
    "Replayed dead-lettered events that applied, by consumer.",
    ["consumer"],
    registry=REGISTRY,
)

# --- progress on the broker (sampled from the consumer) -----------------------------------
CONSUMER_LAG = Gauge(
    "effectively_once_consumer_lag",
    "Records in an assigned partition not yet processed (high watermark - next offset).",
    ["topic", "partition"],
    registry=REGISTRY,
)
OLDEST_UNPROCESSED_AGE = Gauge(
    "effectively_once_oldest_unprocessed_age_seconds",
    "Seconds since the oldest record in flight became due (its timestamp; for a retry "
    "record its retry-due-at); 0 when no batch is in flight.",
    registry=REGISTRY,
)

# --- infrastructure pauses -------------------------------------------------------------------
PAUSES = Counter(
    "effectively_once_infrastructure_pauses_total",
    "Pauses (retry in place) caused by an unreachable dependency.",
    ["dependency"],
    registry=REGISTRY,
)
PAUSE_SECONDS = Counter(
    "effectively_once_infrastructure_pause_seconds_total",
    "Seconds of back-off the pauses planned, each pausing step its own (concurrent "
    "consumers add up; a pause may end sooner when the step is cancelled).",
    ["dependency"],
    registry=REGISTRY,
)
PAUSED = Gauge(
    "effectively_once_paused",
    "1 while a batch in flight, start-up or the relay (until its next cycle ends) is paused "
    "on an infrastructure failure, or while the database or the broker does not answer the "
    "worker's watch (every 5 s), else 0.",
    registry=REGISTRY,
)


# --- the outbox and its relay ---------------------------------------------------------------
OUTBOX_ROWS = Gauge(
    "effectively_once_outbox_rows",
    "Outbox rows by status, sampled from the database (PUBLISHED rows are not counted).",
    ["status"],
    registry=REGISTRY,
)
UNPUBLISHED_FAILURE_RECORDS = Gauge(
    "effectively_once_unpublished_failure_records",
    "Retry and dead-letter records the relay gave up on (the worker's own DEAD outbox rows): "
    "failed events in no topic, their aggregates blocked for their consumer (python -m dlq list).",
    registry=REGISTRY,
)
OUTBOX_OLDEST_PENDING_AGE = Gauge(
    "effectively_once_outbox_oldest_pending_age_seconds",
    "Age of the oldest outbox row not yet published (PENDING or PROCESSING); 0 when none.",
    registry=REGISTRY,
)
RELAY_PUBLISH_LATENCY = Histogram(
    "effectively_once_outbox_publish_latency_seconds",
    "From an outbox row's created_at until the relay marked it published.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600),
    registry=REGISTRY,
)
RELAY_BATCHES = Counter(
    "effectively_once_relay_batches_total",
    "Claims of at least one outbox row by this process's relay.",
    registry=REGISTRY,
)
RELAY_PUBLISHED = Counter(
    "effectively_once_relay_published_total",
    "Outbox rows this process's relay published and marked PUBLISHED.",
    registry=REGISTRY,
)
RELAY_FAILURES = Counter(
    "effectively_once_relay_failures_total",
    "Relay failures: 'row' (a row's publish failed, one attempt counted), 'broker' or "
    "'database' (unreachable, once per pause, or the broker not acknowledging a publish, "
    "once per 30 s of the wait; no attempt counted, retried in place).",
    ["kind"],
    registry=REGISTRY,
)
RELAY_DEAD = Counter(
    "effectively_once_outbox_dead_total",
    "Outbox rows that went DEAD after RELAY_MAX_ATTEMPTS failed publishes.",
    registry=REGISTRY,
)
RELAY_LAST_POLL = Gauge(
    "effectively_once_relay_last_poll_timestamp_seconds",
    "Unix time of the relay's last completed poll (a relay that stops polling is down).",
    registry=REGISTRY,
)
RELAY_FAILED = Gauge(
    "effectively_once_relay_failed",
    "1 while this process's relay cannot run (a setting or producer the broker refused, or an "
    "error it stopped on), else 0.",
    registry=REGISTRY,
)
CLEANUP_DELETED = Counter(
    "effectively_once_cleanup_deleted_total",
    "Rows deleted by retention, by table.",
    ["table"],
    registry=REGISTRY,
)
RELAY_FAILURE_KINDS = ("row", "broker", "database")
CLEANED_TABLES = ("outbox_event", "consumed_event", "failed_event")


def initialise_outbox() -> None:
    """The outbox's zero series (a worker with the relay on, or a relay process)."""
    for kind in RELAY_FAILURE_KINDS:
        RELAY_FAILURES.labels(kind)
    for table in CLEANED_TABLES:
        CLEANUP_DELETED.labels(table)
    set_outbox({})
    relay_failed(False)


def relay_failed(failed: bool) -> None:
    """Whether this process's relay stopped on an error it cannot retry."""
    RELAY_FAILED.set(1 if failed else 0)


def relay_polled() -> None:
    """The relay finished a poll (found rows or not)."""
    RELAY_LAST_POLL.set(time.time())


def relay_batch(rows: int) -> None:
    """The relay claimed ``rows`` rows and settled them."""
    RELAY_BATCHES.inc()


def relay_published(rows: int, latencies: Sequence[float]) -> None:
    """``rows`` rows marked published; ``latencies``: seconds after it was written, of each
    whose write time is known."""
    RELAY_PUBLISHED.inc(rows)
    for latency in latencies:
        RELAY_PUBLISH_LATENCY.observe(max(0.0, latency))


def relay_row_failures(count: int) -> None:
    """``count`` rows' publishes failed (an attempt each)."""
    if count:
        RELAY_FAILURES.labels("row").inc(count)


def relay_infrastructure_failure(dependency: str) -> None:
    """The relay could not reach ``dependency`` (``broker`` or ``database``)."""
    RELAY_FAILURES.labels(dependency if dependency in RELAY_FAILURE_KINDS else "broker").inc()


def relay_dead(count: int) -> None:
    """``count`` rows went DEAD."""
    RELAY_DEAD.inc(count)


def cleaned(table: str, count: int) -> None:
    """Retention deleted ``count`` rows of ``table``."""
    CLEANUP_DELETED.labels(table).inc(count)


OUTBOX_STATUSES = ("PENDING", "PROCESSING", "DEAD")


def set_outbox(
    by_status: Mapping[str, int], oldest_pending_age: float = 0.0, unpublished_failures: int = 0
) -> None:
    """Publish a fresh sample of the outbox gauges."""
    for status in OUTBOX_STATUSES:
        OUTBOX_ROWS.labels(status).set(by_status.get(status, 0))
    OUTBOX_OLDEST_PENDING_AGE.set(oldest_pending_age)
    UNPUBLISHED_FAILURE_RECORDS.set(unpublished_failures)


def initialise(consumers: Iterable[str]) -> None:
    """Create the zero series a dashboard or ``increase()`` needs before the first event."""
    names = list(consumers)
    for dependency in DEPENDENCIES:
        PAUSES.labels(dependency)
        PAUSE_SECONDS.labels(dependency)
    for consumer in names:
        REPLAYS.labels(consumer)
        for source in DUPLICATE_SOURCES:
            DUPLICATES.labels(consumer, source)
    for consumer in [*names, ""]:  # "": poison, no consumer's
        for reason in DeadReason:
            DLT_RECORDS.labels(consumer, reason.value)
    set_parked({consumer: ParkedStats() for consumer in names})
    PAUSED.set(0)
    PREFILTER_CIRCUIT_OPEN.set(0)


def record_outcomes(outcomes: Sequence[Outcome], batch_seconds: float, batch_size: int) -> None:
    """Count a committed batch's outcomes (retries and dead letters are derived from them)."""
    BATCH_DURATION.observe(batch_seconds)
    BATCH_SIZE.observe(batch_size)
    # Counted per label set, not per event: one increment per distinct outcome of the batch.
    by_kind = collections.Counter((o.consumer, o.kind, o.event_type) for o in outcomes)
    for (consumer, kind, event_type), count in by_kind.items():
        EVENTS.labels(consumer, str(kind), _event_type_label(event_type)).inc(count)
    duplicates: collections.Counter[tuple[str, str]] = collections.Counter()
    retries: collections.Counter[tuple[str, str]] = collections.Counter()
    dead: collections.Counter[tuple[str, str]] = collections.Counter()
    replays: collections.Counter[str] = collections.Counter()
    for outcome in outcomes:
        kind = outcome.kind
        if kind == Kind.APPLIED:
            if outcome.detail == REPLAYED:
                replays[outcome.consumer] += 1
            continue
        if kind == Kind.DUPLICATE:
            source = "prefilter" if outcome.detail == PREFILTER_SKIPPED else "database"
            duplicates[(outcome.consumer, source)] += 1
        elif kind == Kind.RETRIED and RETRY_INFIX in outcome.detail:
            # detail: the retry topic the event went to; the tier is its suffix (``5s``)
            retries[(outcome.consumer, outcome.detail.rpartition(RETRY_INFIX)[2])] += 1
        elif kind in (Kind.DEAD_LETTERED, Kind.POISON) and outcome.detail in _DEAD_REASONS:
            # detail: the dlt-reason of the record written; poison read again wrote none
            dead[(outcome.consumer, outcome.detail)] += 1
    for counter, metric in ((duplicates, DUPLICATES), (retries, RETRIES)):
        for labels, count in counter.items():
            metric.labels(*labels).inc(count)
    for labels, count in dead.items():
        DLT_RECORDS.labels(*labels).inc(count)
    for consumer, count in replays.items():
        REPLAYS.labels(consumer).inc(count)


def observe_consumer_batch(consumer: str, seconds: float) -> None:
    """One consumer's transaction over a batch took ``seconds``."""
    CONSUMER_BATCH_DURATION.labels(consumer).observe(seconds)


def record_rerun(consumer: str, reason: str) -> None:
    """``consumer``'s batch was rolled back and runs again, for ``reason``."""
    BATCH_RERUNS.labels(consumer, reason).inc()


def record_pause(dependency: str, delay: float) -> None:
    """Work paused on ``dependency`` and waits ``delay`` seconds before retrying in place."""
    PAUSES.labels(dependency).inc()
    PAUSE_SECONDS.labels(dependency).inc(delay)


def record_unreachable(dependency: str, seconds: float) -> None:
    """``dependency`` went on not answering for ``seconds`` more: pause seconds, no new
    pause (``record_pause`` counted the outage once, when first found)."""
    PAUSE_SECONDS.labels(dependency).inc(seconds)


def set_paused(paused: bool) -> None:
    """Whether the worker is paused now (``app.monitoring.pauses`` decides)."""
    PAUSED.set(1 if paused else 0)


def watch_prefilter(totals: PrefilterTotals) -> None:
    """Export the running totals of the worker's prefilter."""
    _PREFILTER.totals = totals


def on_prefilter_circuit_change(old: str, new: str) -> None:
    """``CircuitBreaker.on_state_change``: the prefilter's circuit moved from ``old`` to ``new``."""
    PREFILTER_CIRCUIT_OPEN.set(0 if new == "closed" else 1)


# Consumers whose parking gauges exist: a consumer whose parked events drained reads 0.
_parked_consumers: set[str] = set()


@dataclass(frozen=True, slots=True)
class ParkedStats:
    """What ``parked_event`` holds for one consumer."""

    events: int = 0
    aggregates: int = 0
    oldest_age_seconds: float = 0.0


def sampling(sample: str) -> None:
    """A sample of the database is taken from now on (0 until one succeeds)."""
    SAMPLED_AT.labels(sample)


def sampled(sample: str) -> None:
    """A sample of the database succeeded now."""
    SAMPLED_AT.labels(sample).set(time.time())


def set_parked(stats: Mapping[str, ParkedStats]) -> None:
    """Publish a fresh sample of the parking gauges (consumers absent from ``stats``: none)."""
    _parked_consumers.update(stats)
    for consumer in _parked_consumers:
        sample = stats.get(consumer, ParkedStats())
        PARKED_EVENTS.labels(consumer).set(sample.events)
        PARKED_AGGREGATES.labels(consumer).set(sample.aggregates)
        OLDEST_PARKED_AGE.labels(consumer).set(sample.oldest_age_seconds)


def set_consumer_lag(lag: Mapping[tuple[str, int], int]) -> None:
    """Publish the lag of exactly the partitions in ``lag`` (revoked ones disappear)."""
    CONSUMER_LAG.clear()
    for (topic, partition), value in lag.items():
        CONSUMER_LAG.labels(topic, str(partition)).set(value)


def set_oldest_unprocessed_age(seconds: float) -> None:
    """Publish the age of the oldest record in flight."""
    OLDEST_UNPROCESSED_AGE.set(seconds)


def render() -> tuple[bytes, str]:
    """The scrape body and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def _event_type_label(event_type: str | None) -> str:
    if not event_type:
        return ""
    return event_type if is_known_event_type(event_type) else "other"


_DEAD_REASONS = frozenset(reason.value for reason in DeadReason)
