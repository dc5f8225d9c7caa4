"""How far the worker got: per-partition lag and the age of the oldest record in flight.

The runtime hands each batch to the pipeline through ``Progress.run``, which
notes it in flight and, once the pipeline returned (after the database commit),
counts its outcomes and moves the processed offsets. "Processed" therefore
means committed to the database, which is what an effectively-once consumer's
lag should count; the broker's committed offset follows shortly after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from app import metrics
from app.monitoring.pauses import batch_scope
from app.pipeline.outcomes import DEAD_LETTERED_BEFORE, Kind, Outcome
from app.records import RawRecord
from dlq.trip import due_at

log = logging.getLogger("effectively_once.outcomes")

TopicPartition = tuple[str, int]

# Outcomes worth a line of their own at INFO or above; applied and duplicate events log at
# DEBUG only. Parked events are routine ordering (a producer's swapped versions, each in the
# database, where ``trace`` finds it): a line each at DEBUG, and one line per consumer and
# batch at INFO that counts them and names the first few.
_NOTABLE = frozenset({"stale", "retried", "dead-lettered", "skipped", "poison"})
NAMED_PARKED = 3


class PartitionSource(Protocol):
    """What lag needs from a Kafka consumer (the faust adapter implements it)."""

    def assignment(self) -> set[TopicPartition]:
        """The partitions this worker works on."""
        ...

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark, if known."""
        ...

    async def position(self, tp: TopicPartition) -> int | None:
        """The consumer's fetch position in the partition, if it has one now (never waits
        for one: a scrape must not hold the consumer)."""
        ...

    def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset of the partition as the consumer last knew it (by
        its own commit, or the seek of an assignment), if any."""
        ...


class Progress:
    """Batches in flight, the next offset to process per partition, and when a batch last
    completed (``/ready`` fails when none has for too long while records wait:
    ``stalled_for``)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._monotonic = monotonic
        self._next: dict[TopicPartition, int] = {}
        self._in_flight: dict[int, float] = {}  # batch token -> when its oldest record was due (s)
        self._tokens = 0
        self._last_done = monotonic()  # the start counts: nothing was due before it
        # The last moment the worker was seen not stalled: the start, a batch started or
        # completed, or ``records_waiting`` finding nothing waiting. A stall counts from it.
        self._not_stalled_at = self._last_done
        self._completed = False  # a batch completed since the start
        self._waiting: dict[str, int] = {}  # topic -> batches waiting for their due time

    async def run(
        self,
        process: Callable[[Sequence[RawRecord]], Awaitable[list[Outcome]]],
        records: Sequence[RawRecord],
    ) -> list[Outcome]:
        """``await process(records)``, counted: metrics and logs of the outcomes, offsets moved.

        A batch that raised (the worker stops) is no longer in flight but not processed.
        """
        self._tokens += 1
        token = self._tokens
        self._in_flight[token] = self._oldest_due(records)
        # A partition's first batch since its assignment: until it commits, its records count
        # as waiting from its first offset (the fetch position is already past them).
        for record in records:
            self._next.setdefault((record.topic, record.partition), record.offset)
        started = time.monotonic()
        self._not_stalled_at = self._monotonic()
        try:
            with batch_scope():
                outcomes = await process(records)
        finally:
            self._in_flight.pop(token, None)
        self._last_done = self._not_stalled_at = self._monotonic()
        self._completed = True
        # A partition's records come in offset order: its last one in the batch is its newest.
        newest = {(record.topic, record.partition): record.offset for record in records}
        for tp, offset in newest.items():
            self._next[tp] = max(self._next.get(tp, 0), offset + 1)
        metrics.record_outcomes(outcomes, time.monotonic() - started, len(records))
        log_outcomes(outcomes)
        return outcomes

    def _oldest_due(self, records: Sequence[RawRecord]) -> float:
        """When the batch's oldest record became due: its timestamp, or for a retry record
        its ``retry-due-at`` (the wait in a retry tier is intended, not a delay)."""
        due = []
        for record in records:
            at = record.timestamp_ms / 1000 if record.timestamp_ms is not None else None
            retry_due = due_at(record)
            if retry_due is not None:
                at = max(at or 0.0, retry_due.timestamp())
            if at is not None:
                due.append(at)
        return min(due) if due else self._clock()

    @contextmanager
    def waiting_until_due(self, topic: str) -> Iterator[None]:
        """A batch of ``topic`` waits for its retry records' due time: a wait intended, not
        a stall, so ``topic``'s lag does not count as records waiting meanwhile."""
        self._waiting[topic] = self._waiting.get(topic, 0) + 1
        try:
            yield
        finally:
            self._waiting[topic] -= 1

    def since_last_batch(self) -> float:
        """Seconds since a batch last completed (or since the start, before the first)."""
        return self._monotonic() - self._last_done

    def stalled_for(self) -> float:
        """Seconds records may have waited without a batch completing: since a batch last
        started or completed, or ``records_waiting`` last found nothing waiting, whichever
        was last. After a quiet spell the first records are no stall: their batch starts
        the count, and so does the check that last saw nothing waiting."""
        return self._monotonic() - self._not_stalled_at

    @property
    def completed_any(self) -> bool:
        """Whether a batch completed since the start (``since_last_batch`` counts from the
        start until one did)."""
        return self._completed

    def unassigned(self) -> None:
        """No partition is this worker's now (a spare replica): nothing can wait for it, so
        a backlog assigned later counts from then, not from its last batch."""
        self._not_stalled_at = self._monotonic()

    def records_waiting(self, lag: dict[TopicPartition, int]) -> int:
        """Records behind in ``lag``, but for topics whose batch waits for a due time. None
        waiting: noted as a moment the worker was not stalled (``stalled_for``)."""
        waiting = sum(behind for (topic, _), behind in lag.items() if not self._waiting.get(topic))
        if not waiting:
            self._not_stalled_at = self._monotonic()
        return waiting

    def oldest_unprocessed_age(self) -> float:
        """Seconds since the oldest record in flight was produced (0: nothing in flight)."""
        if not self._in_flight:
            return 0.0
        return max(0.0, self._clock() - min(self._in_flight.values()))

    async def lag(self, source: PartitionSource) -> dict[TopicPartition, int]:
        """High watermark minus the next offset to process, per assigned partition.

        A partition counts from its first batch's first offset while that batch is in
        flight, and without a batch since it was assigned from the consumer's position
        (where faust resumed: the committed offset); never from before the group's committed
        offset (a partition revoked, worked on by another member and assigned back between
        two looks: this worker's last batch of it is behind what the other committed).
        """
        assigned = source.assignment()
        self._next = {tp: offset for tp, offset in self._next.items() if tp in assigned}
        lag: dict[TopicPartition, int] = {}
        for tp in sorted(assigned):
            high = source.highwater(tp)
            following = self._next.get(tp)
            if following is None:
                following = await source.position(tp)
            committed = source.committed(tp)
            if committed is not None and (following is None or committed > following):
                following = committed
            if high is not None and following is not None:
                lag[tp] = max(0, high - following)
        return lag

    async def publish(self, source: PartitionSource | None) -> None:
        """Set the lag and oldest-unprocessed gauges (lag only when a consumer runs)."""
        metrics.set_oldest_unprocessed_age(self.oldest_unprocessed_age())
        if source is not None:
            metrics.set_consumer_lag(await self.lag(source))


def log_outcomes(outcomes: Sequence[Outcome]) -> None:
    """One line per notable outcome, fields in ``extra`` (``LOG_FORMAT=json`` turns them into
    keys): the only line of a poison record, which names it by where it was read.

    A retried event is a WARNING, a dead letter (and poison dead-lettered now) an
    ERROR, a stale or skipped one INFO. A consumer's parked events get one INFO line for the
    batch (``summarise_parked``), and a line each at DEBUG, as applied and duplicate events do.
    """
    debug = log.isEnabledFor(logging.DEBUG)
    parked: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        kind = outcome.kind
        if kind is Kind.PARKED:
            parked.setdefault(outcome.consumer, []).append(outcome)
        if debug or kind in _NOTABLE:
            _log_one(outcome)
    if parked and log.isEnabledFor(logging.INFO):
        for consumer, some in parked.items():
            summarise_parked(consumer, some)


def summarise_parked(consumer: str, outcomes: Sequence[Outcome]) -> None:
    """One INFO line: ``consumer``'s batch parked ``outcomes``, counted, the first
    ``NAMED_PARKED`` named with what each waits for (``count`` and the first ``eventId`` as
    fields)."""
    first = outcomes[0]
    named = ", ".join(
        f"event {o.event_id} ({o.detail})" if o.detail else f"event {o.event_id}"
        for o in outcomes[:NAMED_PARKED]
    )
    more = len(outcomes) - NAMED_PARKED
    extra = {
        "consumer": consumer,
        "outcome": str(Kind.PARKED),
        "count": len(outcomes),
        "eventId": first.event_id,
    }
    log.info(
        "%s: %d event(s) parked in this batch, waiting for earlier versions: %s%s",
        consumer,
        len(outcomes),
        named,
        f" and {more} more" if more > 0 else "",
        extra=extra,
    )


def _log_one(outcome: Outcome) -> None:
    level = level_of(outcome)
    if not log.isEnabledFor(level):
        return
    kind = str(outcome.kind)
    extra = {
        "eventId": outcome.event_id,
        "consumer": outcome.consumer,
        "outcome": kind,
        "eventType": outcome.event_type,
    }
    for key, attribute in _OPTIONAL_FIELDS:
        value = getattr(outcome, attribute, None)  # fields a pipeline version may add
        if value is not None:
            extra[key] = value
    what = f"event {outcome.event_id}" if outcome.event_id else "record (no eventId)"
    where = f" at {outcome.topic}[{outcome.partition}]@{outcome.offset}" if outcome.topic else ""
    who = f" for {outcome.consumer}" if outcome.consumer else ""
    detail = f": {outcome.detail}" if outcome.detail else ""
    error = f" ({outcome.error})" if outcome.error else ""
    log.log(level, "%s %s%s%s%s%s", what, kind, where, who, detail, error, extra=extra)


def level_of(outcome: Outcome) -> int:
    """The log level of ``outcome``'s line."""
    kind = outcome.kind
    if kind is Kind.RETRIED:
        return logging.WARNING
    if kind is Kind.DEAD_LETTERED:
        return logging.ERROR
    if kind is Kind.POISON:
        return logging.INFO if outcome.detail == DEAD_LETTERED_BEFORE else logging.ERROR
    return logging.INFO if kind in _NOTABLE else logging.DEBUG


_OPTIONAL_FIELDS = (
    ("traceId", "trace_id"),
    ("topic", "topic"),
    ("partition", "partition"),
    ("offset", "offset"),
)
