"""One consumer, one batch, one transaction: dedup, version gate, apply, park, drain.

The order inside the transaction matters:
1. read the batch's aggregate versions (locking them, or on PostgreSQL noting which
   transaction wrote each, see ``store``), so nobody else applies them meanwhile
   unnoticed,
2. read which eventIds this consumer already applied or parked (dedup, after the
   versions so a concurrent worker's commit is visible), and its failures of them
   not yet settled: an event that takes effect, or is found applied, through any
   copy settles them (``resolved``). With ``trust_versions`` (a batch's first
   attempt) a versioned event ahead of its aggregate's stored version, or of an
   aggregate with none, is not looked up among the applied: only an applied event
   takes a version, so it cannot have been applied (the common case, most of a
   batch). Should one have been all the same (an eventId a producer reused for
   another aggregate), its dedup record's insert fails and the batch runs again
   with every id looked up, as after any conflict,
3. read the parked events of the batch's aggregates (so a gap can close): step 2's
   statement names the aggregates that have any, nearly always none, and only theirs
   are read,
4. walk the events in arrival order: duplicate, stale, park, or apply and drain
   the parked successors (in FAST mode the walk only plans: the handlers then
   run wave by wave, see ``apply.Mode``),
5. write versions (on PostgreSQL together with the dedup records, in one statement
   that finds a concurrent worker's writes, and the batch runs again), dedup records,
   parked rows, failures and the outbox rows (failures' retry and DLT records, the
   handlers' ``ctx.emit``) in a few statements.
The caller commits; only after that may the offsets move. A parked event the drain
takes out of ``parked_event`` and fails leaves with its retry record in the outbox,
in this same transaction. In ``ESCALATED`` mode each event's dedup or parked record is
written as it is decided, in the event's own savepoint, so that a record the database
refuses fails (and routes) that event alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.context import HandlerContext
from app.db.tables import consumed_event, parked_event
from app.pipeline.apply import (
    EventFailed,
    HandlerFailed,
    Mode,
    ReusedEventId,
    apply_isolated,
    apply_waves,
)
from app.pipeline.decode import Decoded, EventOf, Poison, decode
from app.pipeline.gate import Gate, decide, effective_last
from app.pipeline.outcomes import REPLAYED, Applied, Duplicate, Outcome, Parked, Skipped, Stale
from app.pipeline.route import FailureRouter, Routed
from app.pipeline.store import (
    Aggregate,
    BatchChanges,
    ConsumerStore,
    ParkedRow,
    now,
    parked_row,
)
from app.registry import Registry
from app.settings import UnseenAggregatePolicy
from dlq.dead import FailureStatus, event_text


@dataclass
class ConsumerBatch:
    """Processes one batch of decoded events for one consumer in an open transaction."""

    consumer: str
    registry: Registry
    policy: UnseenAggregatePolicy
    ctx: HandlerContext
    mode: Mode
    router: FailureRouter
    # What the records were decoded with: a parked event must read the same way again.
    default_aggregate_type: str
    # Look up dedup records only for the events the version rows do not tell apart.
    trust_versions: bool = False
    # ``ISOLATED`` after a ``FAST`` attempt: the handler failure it met there, when it
    # names its event. That event is routed with it, its handler not run a second time
    # (an outside call it makes would be made twice per attempt).
    failed_before: HandlerFailed | None = None
    # The seconds a handler's calls may take (``run_handlers``); None: no limit.
    handler_timeout: float | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    # The events applied (each ``Applied`` outcome's, parked ones drained included), by
    # eventId, as their dedup records name them: what the Redis prefilter learns.
    applied: dict[str, EventOf] = field(default_factory=dict)
    _changes: BatchChanges = field(default_factory=BatchChanges.empty)
    _versions: dict[Aggregate, int | None] = field(default_factory=dict)
    _parked_db: dict[Aggregate, dict[int, ParkedRow]] = field(default_factory=dict)
    _parked_here: dict[Aggregate, dict[int, Decoded]] = field(default_factory=dict)
    _plan: list[Decoded] = field(default_factory=list)
    _store: ConsumerStore = field(init=False)
    # ESCALATED mode: the events parked here whose row is written already.
    _parked_written: set[str] = field(default_factory=set)
    # This consumer's failures of the batch's events that are not settled, by eventId.
    _open_failures: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    # Of those retrying or dead, the tier attempts made so far, by failure key.
    _attempts_made: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # Events whose dedup record cannot be written: their eventId is another event's.
    _undeduped: set[str] = field(default_factory=set)

    async def run(self, events: list[Decoded]) -> list[Outcome]:
        """Process ``events`` (arrival order) and write the results; the caller commits."""
        self._store = store = ConsumerStore(self.ctx.session, self.consumer)
        gated = [e.event.aggregate for e in events if e.event.aggregate_version is not None]
        self._versions = await store.read_versions(gated)
        found = await store.seen_event_ids(
            [e.event_id for e in events],
            self._maybe_applied(events) if self.trust_versions else None,
            parked_of=gated,
        )
        self._open_failures = found.open_failures
        self._attempts_made = found.attempts_made
        seen = found.consumed | found.parked
        holding = [agg for agg in gated if agg in found.holding]
        self._parked_db = await store.parked_for(holding) if holding else {}
        first_of: dict[str, EventOf] = {}  # the batch's events by eventId, as first met
        for item in events:
            this = item.event_of
            recorded = found.recorded_as.get(item.event_id) or first_of.setdefault(
                item.event_id, this
            )
            if recorded != this:  # a producer reused another event's id
                if not item.trip.skip:
                    reused = ReusedEventId(item.event_id, event_text(*recorded), event_text(*this))
                    self._fail(item, reused)
                    continue
                # An operator's skip of it: its version is taken, with no dedup record.
                self._undeduped.add(item.event_id)
                await self._gate(item)
                continue
            if item.event_id in seen:
                self._out(Duplicate, item)
                if item.event_id in found.consumed:  # it took effect (through any copy)
                    self._settle_failures(item.event_id, FailureStatus.RESOLVED)
                continue
            if self._attempt_made(item):  # delivered again after its failure was routed
                self._out(Duplicate, item)
                continue
            seen.add(item.event_id)
            await self._gate(item)
        if self.mode is Mode.FAST:
            await apply_waves(
                self._plan,
                lambda event_type: self.registry.handlers_for(self.consumer, event_type),
                self.ctx,
                self.handler_timeout,
            )
        self._changes.parked = [
            parked_row(self.consumer, item.event, item.record)
            for slots in self._parked_here.values()
            for item in slots.values()
            if item.event_id not in self._parked_written
        ]
        self._changes.held = {agg for agg, slots in self._parked_here.items() if slots}
        self._changes.emitted = self.ctx._emitted
        await store.save(self._changes)
        return self.outcomes

    def _attempt_made(self, item: Decoded) -> bool:
        """Whether ``item``'s attempt was made already for this consumer: the record (from
        the main topic, or this consumer's retry record) failed, its batch committed the
        next tier's record (or the DLT's), then the commit of its offset failed (the broker
        went away) and it came again. Run again, it would fork the event's trip into two
        (the handler run once more per tier, two DLT records). The failure row is this
        event's (found by its eventId) at this position; a replay (at a position of its
        own, its attempts counted afresh) is run."""
        if not self._attempts_made:  # no failure of the batch's events retrying or dead
            return False
        trip = item.trip
        if trip.skip or trip.consumer not in (None, self.consumer):
            return False
        key = (self.consumer, trip.original_topic, trip.original_partition, trip.original_offset)
        record = item.record
        if not trip.attempts and key[1:] != (record.topic, record.partition, record.offset):
            return False  # a first attempt elsewhere than its position: a replay of it
        made = self._attempts_made.get(key)
        return made is not None and made > trip.attempts

    def _maybe_applied(self, events: list[Decoded]) -> set[str]:
        """The eventIds that may have a dedup record: unversioned events, and versioned
        ones at or below their aggregate's stored version."""
        asked = set()
        for item in events:
            version = item.event.aggregate_version
            stored = None if version is None else self._versions.get(item.event.aggregate)
            if version is None or (stored is not None and version <= stored):
                asked.add(item.event_id)
        return asked

    @property
    def outbox_rows(self) -> int:
        """Outbox rows the batch wrote (failures' records and emitted events)."""
        return len(self._changes.outbox) + len(self._changes.emitted)

    async def _gate(self, item: Decoded) -> None:
        version = item.event.aggregate_version
        if version is None:
            await self._apply(item)
            return
        agg = item.event.aggregate
        stored = self._versions.get(agg)
        last = effective_last(stored, version, self.policy)
        if stored is None and self.policy is UnseenAggregatePolicy.FROM_FIRST_SEEN:
            # The start adopted for an unseen aggregate is kept even if this event fails,
            # so that its successors wait for it (0 too, for a first event at version 1).
            self._versions[agg] = self._changes.versions[agg] = last
        verdict = decide(last, version)
        if verdict is Gate.STALE:
            self._out(Stale, item, f"version {version} <= last applied {last}")
        elif verdict is Gate.PARK:
            slots = self._parked_here.setdefault(agg, {})
            if version in slots or version in self._parked_db.get(agg, {}):
                self._out(Stale, item, f"another event already holds version {version}")
                return
            if self.mode is Mode.ESCALATED and not await self._park_alone(item):
                return
            slots[version] = item
            event = item.event
            self._out(
                Parked,
                item,
                f"{event.aggregate_type} {event.aggregate_id} at version {version}, "
                f"waiting for version {last + 1}",
            )
        elif await self._apply(item):
            self._versions[agg] = version
            self._changes.versions[agg] = version
            if agg in self._parked_here or agg in self._parked_db:
                await self._drain(agg)

    async def _drain(self, agg: Aggregate) -> None:
        """Apply the parked successors of ``agg`` while they form an unbroken chain."""
        while True:
            last = self._versions[agg]
            assert last is not None  # the caller just applied a version
            nxt = last + 1
            here = self._parked_here.get(agg, {}).pop(nxt, None)
            if here is not None and here.event_id in self._parked_written:
                self._changes.unparked.add(here.event_id)
            stored = self._parked_db.get(agg, {}).pop(nxt, None)
            if stored is not None:
                self._changes.unparked.add(stored.event_id)
                found = decode(
                    stored.record, self.registry.event_types, self.default_aggregate_type
                )
                if not isinstance(found, Decoded):
                    # It decoded when it was parked: the schemas changed since (a deploy).
                    self._dead_letter(found)
                    return
                here = found
            if here is None:
                return
            if not await self._apply(here):
                return
            self._versions[agg] = nxt
            self._changes.versions[agg] = nxt

    async def _apply(self, item: Decoded) -> bool:
        """Apply (FAST: plan) the event and add its dedup record.

        False when a handler failed: the event is then routed to a retry tier or
        the DLT, and its aggregate's later versions wait for it (they park).
        An operator's skip takes the version without running any handler.
        """
        trip = item.trip
        handlers = (
            [] if trip.skip else self.registry.handlers_for(self.consumer, item.event.event_type)
        )
        event = item.event
        consumed = {
            "consumer_group": self.consumer,
            "event_id": event.event_id,
            "event_type": event.event_type,
            "aggregate_type": event.aggregate_type,
            "aggregate_id": event.aggregate_id,
            "aggregate_version": event.aggregate_version,
            # applied_at: stamped by ConsumerStore.save, just before the commit
        }
        deduped = item.event_id not in self._undeduped
        escalated = self.mode is Mode.ESCALATED
        if self.mode is Mode.FAST:
            if handlers:
                self._plan.append(item)
        elif self.failed_before is not None and item.event_id == self.failed_before.event_id:
            failed, self.failed_before = self.failed_before, None
            self._fail(item, failed)
            return False
        elif handlers or escalated:
            claim = (
                (lambda: self._store.claim_alone(consumed_event, consumed | {"applied_at": now()}))
                if escalated and deduped
                else None
            )
            try:
                await apply_isolated(
                    handlers, item, self.ctx, self.mode, claim, self.handler_timeout
                )
            except EventFailed as failed:
                self._fail(item, failed)
                return False
        status = FailureStatus.SKIPPED if trip.skip else FailureStatus.RESOLVED
        if trip.consumer is not None:
            self._changes.resolve(trip, status)
        # Its failures through other copies (a producer's second copy) are over too.
        self._settle_failures(item.event_id, status)
        if not escalated and deduped:  # escalated: written with its effects already
            self._changes.consumed.append(consumed)
        if trip.skip:
            self._out(Skipped, item)
        else:  # a replay counts once it applies; its later trips through the tiers carry the count
            self._out(Applied, item, REPLAYED if trip.replay_count else "")
            self.applied[item.event_id] = item.event_of
        return True

    def _settle_failures(self, event_id: str, status: str) -> None:
        """Mark this consumer's open failures of ``event_id`` ``status``: the event took
        effect (or was skipped) for it, through whichever copy."""
        for key in self._open_failures.get(event_id, ()):
            self._changes.settle(key, status)

    async def _park_alone(self, item: Decoded) -> bool:
        """``ESCALATED`` mode: write ``item``'s parked row now, in a savepoint of its own;
        False when the database refused it (``item`` is then routed)."""
        try:
            await self._store.claim_alone(
                parked_event, parked_row(self.consumer, item.event, item.record)
            )
        except EventFailed as failed:
            self._fail(item, failed)
            return False
        self._parked_written.add(item.event_id)
        return True

    def _fail(self, item: Decoded, failed: EventFailed) -> None:
        """Route ``item``, which failed for this consumer (its effects are rolled back)."""
        routed = self.router.handler_failure(item, self.consumer, failed)
        self._route(routed)
        self.outcomes.append(
            Outcome(
                routed.kind,
                self.consumer,
                item.event_id,
                item.event.event_type,
                routed.detail,  # the tier's topic or the dlt-reason: a bounded label
                routed.error,
            )
        )

    def _dead_letter(self, poison: Poison) -> None:
        """A parked event that no longer decodes goes to the DLT for this consumer; its
        aggregate waits for it, as for any dead event (replay it once the schema reads it)."""
        routed = self.router.poison(poison, self.consumer)
        self._route(routed)
        self.outcomes.append(
            poison.outcome(routed.kind, self.consumer, routed.detail, routed.error)
        )

    def _route(self, routed: Routed) -> None:
        """Record the failure and its next record together: the record as an outbox row."""
        self._changes.failed.append(routed.row)
        self._changes.outbox.append(routed.outbox_row(now()))

    def _out(self, make: Callable[..., Outcome], item: Decoded, *detail: str) -> None:
        self.outcomes.append(make(self.consumer, item.event_id, item.event.event_type, *detail))
