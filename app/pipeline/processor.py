"""The batch processor: the one place the pipeline's order is declared.

For each batch the runtime hands over, in this order and for these reasons:

1. read every record's JSON (pure);
2. ask the Redis prefilter (when configured) which events each consumer is
   known to have applied: those skip the database (a fast path, never the truth),
   and a record every consumer it is for applied is not validated either;
3. validate the rest (pure; poison is found before any transaction opens; a payload
   only if a consumer here handles its eventType). Without a prefilter nothing
   needs the JSON between 1 and 3, and each record goes from bytes to event in one pass;
4. dead-letter the poison once, for nobody in particular (it is no consumer's
   event): its ``failed_event`` row and its DLT record (an outbox row) in one
   transaction;
5. for each consumer (a retry record only for the consumer it names), one
   transaction: read versions, dedup, gate, apply, park/drain, route failures,
   write records, failures' retry and DLT records and emitted events to the
   outbox (``ConsumerBatch``) and commit; first without savepoints, and only if a
   handler fails, again with one savepoint per event, so the common batch pays for
   no isolation it does not use;
6. wake the relay (``on_outbox``) when the commit wrote outbox rows: it publishes
   them, and the offsets need not wait for that, because they are durable already;
7. run the after-commit callbacks of the transactions that committed, and tell
   the prefilter what was applied (only now: Redis never claims an uncommitted event).
   6 and 7 run to their end even if the batch is cancelled meanwhile (``together``);
   if one consumer's run raises, the others are cancelled and waited for first;
8. return the outcomes, so that metrics and logs are derived from values.

An infrastructure failure at any step pauses and retries that step in place
(consumers that already committed are not run again); a consumer's batch that
the database keeps failing on the same cancelled statement is escalated after
``escalate_after`` pauses: run event by event, the event whose handler meets it
is routed (``Mode.ESCALATED``). A batch that meets a conflict (a version row or
dedup record another transaction wrote) runs again at once, then after a
back-off, and after ``escalate_after`` conflicts in a row is escalated too: an
event whose dedup or parking record the database refuses is routed.

Only when this returns may the runtime let the offsets move: every effect is
committed by then, and every record still to publish is committed in the outbox,
so a crash at any point loses nothing (the relay ships the rows, the broker
redelivers the rest).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import metrics, scrub
from app.context import HandlerContext
from app.db.dialect import insert_rows
from app.db.tables import failed_event, outbox_event
from app.failure_log import log_failure
from app.pipeline.after_commit import Report, run_after_commit
from app.pipeline.apply import HandlerFailed, Mode
from app.pipeline.classify import is_unique_violation, lost_a_race
from app.pipeline.consumer_batch import ConsumerBatch
from app.pipeline.decode import (
    Decoded,
    EventOf,
    Poison,
    Read,
    decode,
    read_batch,
    sort_out,
    validate_batch,
)
from app.pipeline.outcomes import DEAD_LETTERED_BEFORE, Kind, Outcome
from app.pipeline.pause import Backoff, Holds, OnPause, Streak, retry_in_place
from app.pipeline.route import FailureRouter, Routed
from app.pipeline.store import (
    VersionConflict,
    dead_again,
    failure_key,
    now,
    recorded_failures,
)
from app.pipeline.together import all_or_none, to_the_end
from app.pipeline.warm import warm_up
from app.prefilter.stage import Known, Lookup, ask, remember_applied, skip_known
from app.records import RawRecord
from app.registry import Registry
from app.settings import DEFAULT_AGGREGATE_TYPE, UnseenAggregatePolicy
from dlq.dead import FailureStatus

T = TypeVar("T")
_Tripped = TypeVar("_Tripped", Decoded, Read, Poison)
RERUN_CONFLICT = "conflict"
RERUN_HANDLER_FAILED = "handler-failed"
RERUN_ESCALATED = "escalated"
# How long a committed consumer's publishing may go on after its batch was cancelled.
AFTER_COMMIT_GRACE_SECONDS = 10.0
# How long one after-commit callback may run: the batch's offsets wait for its callbacks,
# so one that never returns (an HTTP call without a timeout) would hold its partitions.
AFTER_COMMIT_LIMIT_SECONDS = 30.0
# A failure whose record is on its way back (a retry tier's, an operator's replay): if that
# record turns out to be poison, it is dead-lettered again.
AWAITING_RECORD = frozenset({FailureStatus.RETRYING.value, FailureStatus.REPLAYED.value})
log = logging.getLogger("effectively_once.pipeline")


@dataclass
class BatchProcessor:
    """Runs every registered consumer over a batch of records, effectively once."""

    sessions: async_sessionmaker[AsyncSession]
    registry: Registry
    router: FailureRouter
    on_outbox: Callable[[], None] | None = None
    policy: UnseenAggregatePolicy = UnseenAggregatePolicy.FROM_ONE
    default_aggregate_type: str = DEFAULT_AGGREGATE_TYPE
    backoff: Backoff = field(default_factory=Backoff)
    concurrent_consumers: bool = True
    on_pause: OnPause | None = None
    prefilter: Lookup | None = None
    escalate_after: int = 3
    app_id: str | None = None  # the deployment this is: another's records are left alone
    after_commit_limit: float = AFTER_COMMIT_LIMIT_SECONDS
    handler_timeout: float | None = None  # HANDLER_TIMEOUT_SECONDS (``run_handlers``)
    on_after_commit_failure: Report | None = None  # each failed after-commit callback

    @property
    def decodes_first(self) -> bool:
        """True when records are decoded before anything else (no prefilter to ask first):
        then records may be decoded ahead (``decoder``) and handed to ``process``."""
        return self.prefilter is None

    async def warm_up(self) -> None:
        """Open each consumer's connection and run its batch's reads once (``warm``)."""
        await warm_up(self.sessions, list(self.registry.consumers), self.concurrent_consumers)

    def decoder(self) -> Callable[[RawRecord], Decoded | Poison]:
        """Decodes a record as ``process`` does (the handlers' event types read once)."""
        payloads, default_aggregate_type = self.registry.event_types, self.default_aggregate_type
        return lambda record: decode(record, payloads, default_aggregate_type)

    async def process(
        self,
        records: Sequence[RawRecord],
        decoded: Sequence[Decoded | Poison] | None = None,
        holds: Holds | None = None,
    ) -> list[Outcome]:
        """Process ``records``; returns once every effect is committed, with every failure's
        retry or DLT record in the outbox. Bad events never raise. ``decoded``: the records
        decoded ahead by ``decoder``, in their order (used only when ``decodes_first``).
        ``holds``: whether the batch is still this worker's; a batch paused on an
        infrastructure failure raises ``BatchGivenUp`` once it is not (``pause``)."""
        consumers = self.registry.consumers
        payloads = self.registry.event_types
        known: Known = {}
        outcomes: list[Outcome] = []
        if self.decodes_first:
            # Nothing asks for the JSON before validation: bytes to events in one pass.
            events, poison = sort_out(
                decoded if decoded is not None else map(self.decoder(), records)
            )
            events = self._ours(events)
        else:
            reads, poison = read_batch(list(records), self.default_aggregate_type)
            # Redis only ever knows committed events, so its answer holds across retries.
            reads, known, outcomes = await ask(self.prefilter, consumers, self._ours(reads))
            events, invalid = validate_batch(reads, payloads)
            poison += invalid
        poison = self._ours(poison)
        # Dead letters of one partition go out in the order their records came.
        poison = sorted(poison, key=lambda p: (p.record.partition, p.record.offset))
        if poison:
            outcomes += await self._dead_letter_poison(poison, holds)
        if events:
            runs = [
                self._consumer(name, mine, known.get(name, {}), holds)
                for name in consumers
                if (mine := [e for e in events if e.trip.consumer in (None, name)])
            ]
            _warn_unknown_targets(events, self.registry)
            _note_unknown_types(events)
            if self.concurrent_consumers:
                results = await all_or_none(runs)
            else:
                results = [await run for run in runs]
            for consumer_outcomes in results:
                outcomes.extend(consumer_outcomes)
        return outcomes

    def _ours(self, items: list[_Tripped]) -> list[_Tripped]:
        """``items`` but the retry, replay and skip records of another deployment (another
        ``APP_ID`` reading the topic: its consumers may share a name with ours)."""
        mine = (None, self.app_id)
        if self.app_id is None or all(item.trip.app_id in mine for item in items):
            return items
        return [item for item in items if item.trip.app_id in mine]

    async def _consumer(
        self,
        consumer: str,
        events: list[Decoded],
        known: Mapping[str, EventOf],
        holds: Holds | None,
    ) -> list[Outcome]:
        todo, skipped = skip_known(known, consumer, events)
        if not todo:
            return skipped
        streak = Streak()
        batch = await self._until_done(
            f"batch of {len(todo)} for {consumer}",
            lambda: self._consumer_once(consumer, todo, streak),
            streak,
            holds,
        )
        # Committed: what follows runs to its end even if the batch is cancelled now.
        await to_the_end(self._after_commit(consumer, batch), AFTER_COMMIT_GRACE_SECONDS)
        return skipped + batch.outcomes

    async def _after_commit(self, consumer: str, batch: ConsumerBatch) -> None:
        # Committed with its failures' records in the outbox: the relay ships them.
        if batch.outbox_rows:
            self._outbox_written()
        await run_after_commit(
            batch.ctx, self.router.detail, self.after_commit_limit, self.on_after_commit_failure
        )
        await remember_applied(self.prefilter, consumer, batch.applied)

    async def _until_done(
        self,
        what: str,
        operation: Callable[[], Awaitable[T]],
        streak: Streak | None = None,
        holds: Holds | None = None,
    ) -> T:
        return await retry_in_place(
            what, operation, self.backoff, on_pause=self.on_pause, streak=streak, holds=holds
        )

    async def _consumer_once(
        self, consumer: str, events: list[Decoded], streak: Streak
    ) -> ConsumerBatch:
        conflicts = races = 0
        while True:
            try:
                if streak.failures >= self.escalate_after:
                    return await self._escalated(
                        consumer,
                        events,
                        f"the database cancelled a statement of this batch {streak.failures} "
                        f"times in a row ({streak.last[1] if streak.last else '?'})",
                    )
                if conflicts >= self.escalate_after:
                    return await self._escalated(
                        consumer, events, f"the batch met a conflict {conflicts} times in a row"
                    )
                return await self._consumer_attempt(consumer, events, first=conflicts == 0)
            except VersionConflict as conflict:
                # Rolled back; another worker committed some of these aggregates or events
                # meanwhile (a rebalance): the next run reads what it did, and the first runs
                # again at once. A conflict that comes back is no race the next read settles
                # (a record the database takes for another, say): the runs after it back off,
                # and after ``escalate_after`` the batch runs event by event.
                conflicts += 1
                await self._again(consumer, str(conflict), conflicts)
            except Exception as exc:
                if not lost_a_race(exc):
                    raise
                # The database rolled this transaction back so that another could commit (a
                # deadlock between two workers' handlers, a serialization failure): no
                # outage, and run again it settles. Never escalated: a race that keeps being
                # lost waits, as an outage does, and no event is routed for it.
                races += 1
                await self._again(consumer, f"the batch lost a race ({scrub.said(exc)})", races)

    async def _again(self, consumer: str, why: str, times: int) -> None:
        """Count a conflict's rerun: the first at once (INFO), the next after a back-off."""
        metrics.record_rerun(consumer, RERUN_CONFLICT)
        if times == 1:
            log.info("%s: %s; running the batch again", consumer, why)
            return
        delay = self.backoff.delay(times - 1)
        log.warning(
            "%s: %s (%d times in a row); running the batch again in %.1fs",
            consumer,
            why,
            times,
            delay,
        )
        await asyncio.sleep(delay)

    async def _consumer_attempt(
        self, consumer: str, events: list[Decoded], first: bool = True
    ) -> ConsumerBatch:
        try:
            # A first attempt trusts the version rows to tell most events unapplied; after a
            # conflict every eventId is looked up (see ``ConsumerBatch``).
            return await self._transaction(consumer, events, Mode.FAST, trust_versions=first)
        except HandlerFailed as failed:
            text = self.router.detail.describe(failed.cause)
            log_failure(
                log,
                logging.WARNING,
                text,
                "%s: a handler failed (%s: %s); re-running the batch event by event",
                consumer,
                failed,
                text.line,
            )
            metrics.record_rerun(consumer, RERUN_HANDLER_FAILED)
            known = failed
        # Outside the except block, so the failures found now don't chain the first one.
        return await self._transaction(consumer, events, Mode.ISOLATED, failed_before=known)

    async def _escalated(self, consumer: str, events: list[Decoded], why: str) -> ConsumerBatch:
        """The same failure kept coming back (``why``): run the batch event by event, and route
        the event whose handler meets it again, or whose record the database refuses."""
        log.warning(
            "%s: %s; running it event by event, an event whose handler meets it again or "
            "whose record the database refuses is routed",
            consumer,
            why,
        )
        metrics.record_rerun(consumer, RERUN_ESCALATED)
        return await self._transaction(consumer, events, Mode.ESCALATED)

    async def _transaction(
        self,
        consumer: str,
        events: list[Decoded],
        mode: Mode,
        trust_versions: bool = False,
        failed_before: HandlerFailed | None = None,
    ) -> ConsumerBatch:
        started = time.perf_counter()
        async with self.sessions() as session:
            ctx = HandlerContext(session=session, consumer=consumer)
            batch = ConsumerBatch(
                consumer,
                self.registry,
                self.policy,
                ctx,
                mode,
                self.router,
                self.default_aggregate_type,
                trust_versions,
                failed_before,
                self.handler_timeout,
            )
            async with session.begin():
                await batch.run(events)
            # committed: the effects, dedup records, versions and failures are durable together
        metrics.observe_consumer_batch(consumer, time.perf_counter() - started)
        return batch

    async def _dead_letter_poison(
        self, poison: list[Poison], holds: Holds | None = None
    ) -> list[Outcome]:
        # A retry or replay record for one consumer that no longer decodes is that
        # consumer's failure: its row goes dead, its DLT record names the consumer.
        routed = [self.router.poison(p, p.trip.consumer) for p in poison]

        async def remember() -> list[Routed]:
            async with self.sessions() as session, session.begin():
                # A record recorded before (read again after a crash, before its offset was
                # committed) has its DLT record in the outbox already: written with its row.
                # One whose row waits for it (``retrying``, ``replayed``) is dead-lettered again.
                recorded = await recorded_failures(session, [r.row for r in routed])
                fresh, again = [], []
                for r in routed:
                    status = recorded.get(key := failure_key(r.row))
                    if status is None:
                        fresh.append(r)
                    elif status in AWAITING_RECORD:
                        again.append(r)
                    # Two records naming one origin (a DLT record replayed twice) are one
                    # failure: the first is recorded, the second was dead-lettered before.
                    recorded[key] = FailureStatus.DEAD
                try:
                    await insert_rows(session, failed_event, [r.row for r in fresh])
                except IntegrityError as exc:
                    if not is_unique_violation(exc):
                        raise
                    raise VersionConflict("poison recorded meanwhile") from exc
                for r in again:
                    if not await dead_again(session, r.row, AWAITING_RECORD):
                        raise VersionConflict("poison's failure settled meanwhile")
                stamp = now()
                written = fresh + again
                await insert_rows(session, outbox_event, [r.outbox_row(stamp) for r in written])
                return written

        while True:
            try:
                fresh = await self._until_done("recording poison", remember, holds=holds)
                break
            except VersionConflict:
                continue  # another worker recorded some of them: read again what it did
        if fresh:
            self._outbox_written()
        dead = {id(r) for r in fresh}
        outcomes = []
        for p, r in zip(poison, routed, strict=True):
            # Logged with the batch's outcomes (``log_outcomes``), one line each: an ERROR,
            # or INFO when its DLT record was written before (none now, and none counted).
            detail = r.detail if id(r) in dead else DEAD_LETTERED_BEFORE
            outcomes.append(p.outcome(Kind.POISON, "", detail, r.error))
        return outcomes

    def _outbox_written(self) -> None:
        if self.on_outbox is not None:
            self.on_outbox()


def _warn_unknown_targets(events: list[Decoded], registry: Registry) -> None:
    """A retry or replay for a consumer this worker does not know is worth an error line;
    one for a consumer that another deployment runs (``CONSUMERS``) is that one's to apply."""
    consumers = registry.consumers
    for item in events:
        target = item.trip.consumer
        if target is not None and target not in consumers and target not in registry.elsewhere:
            log.error(
                "%s targets consumer %r, which this worker does not run; it is left on its "
                "topic (replay it once the consumer is deployed again)",
                item.record.position,
                target,
            )


# The eventTypes no schema of this worker knows, each said once per process.
_unknown_types_said: set[str] = set()
MOST_UNKNOWN_TYPES_SAID = 1_000


def _note_unknown_types(events: list[Decoded]) -> None:
    """An eventType no payload model here knows takes effect for nobody and advances every
    consumer's version (``docs/design.md``): legitimate on a topic shared with other
    services, a silent loss when a producer misspelt a type. Said once per type, at INFO."""
    for item in events:
        if item.known or item.trip.skip:  # an operator's skip names no type a producer wrote
            continue
        event_type = item.event.event_type
        if event_type in _unknown_types_said or len(_unknown_types_said) >= MOST_UNKNOWN_TYPES_SAID:
            continue
        _unknown_types_said.add(event_type)
        log.info(
            "eventType %r (first at %s) has no payload model in this worker: no handler runs "
            "for it, and each consumer takes its version; a misspelt type reads the same way",
            event_type,
            item.record.position,
        )
