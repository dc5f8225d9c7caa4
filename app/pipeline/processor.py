"""The batch processor: the one place the pipeline's order is declared.

For each batch the runtime hands over, in this order and for these reasons:

1. decode every record (pure; poison is found before any transaction opens);
2. record the poison once, for nobody in particular (it is no consumer's event);
3. for each consumer, one transaction: lock versions, dedup, gate, apply,
   park/drain, write records (``ConsumerBatch``) and commit; first without
   savepoints, and only if a handler fails, again with one savepoint per event,
   so the common batch pays for no isolation it does not use;
4. run the after-commit callbacks of the transactions that committed;
5. return the outcomes, so that metrics and logs are derived from values.

An infrastructure failure at any step pauses and retries that step in place
(consumers that already committed are not run again). Only when this returns
may the runtime let the offsets move.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.context import HandlerContext
from app.db.dialect import insert_ignore
from app.db.tables import failed_event
from app.pipeline.apply import HandlerFailed, Mode
from app.pipeline.consumer_batch import ConsumerBatch
from app.pipeline.decode import Decoded, Poison, decode_batch
from app.pipeline.outcomes import Kind, Outcome
from app.pipeline.pause import Backoff, OnPause, retry_in_place
from app.pipeline.store import failure_row
from app.records import RawRecord
from app.registry import Registry
from app.settings import UnseenAggregatePolicy

log = logging.getLogger("effectively_once.pipeline")


@dataclass
class BatchProcessor:
    """Runs every registered consumer over a batch of records, effectively once."""

    sessions: async_sessionmaker[AsyncSession]
    registry: Registry
    policy: UnseenAggregatePolicy = UnseenAggregatePolicy.FROM_ONE
    backoff: Backoff = field(default_factory=Backoff)
    concurrent_consumers: bool = True
    on_pause: OnPause | None = None

    async def process(self, records: Sequence[RawRecord]) -> list[Outcome]:
        """Process ``records``; returns once every effect is committed. Bad events never raise."""
        events, poison = decode_batch(list(records))
        outcomes = [
            Outcome(
                Kind.POISON, "", p.envelope.event_id if p.envelope else None, None, str(p.error)
            )
            for p in poison
        ]
        if poison:
            await retry_in_place(
                "recording poison",
                lambda: self._record_poison(poison),
                self.backoff,
                on_pause=self.on_pause,
            )
        if events:
            runs = [self._consumer_until_done(name, events) for name in self.registry.consumers]
            if self.concurrent_consumers:
                results = await asyncio.gather(*runs)
            else:
                results = [await run for run in runs]
            for consumer_outcomes in results:
                outcomes.extend(consumer_outcomes)
        return outcomes

    async def _consumer_until_done(self, consumer: str, events: list[Decoded]) -> list[Outcome]:
        return await retry_in_place(
            f"batch of {len(events)} for {consumer}",
            lambda: self._consumer_once(consumer, events),
            self.backoff,
            on_pause=self.on_pause,
        )

    async def _consumer_once(self, consumer: str, events: list[Decoded]) -> list[Outcome]:
        try:
            return await self._transaction(consumer, events, Mode.FAST)
        except HandlerFailed as failed:
            log.info(
                "%s: a handler failed (%s); re-running the batch event by event", consumer, failed
            )
            return await self._transaction(consumer, events, Mode.ISOLATED)

    async def _transaction(self, consumer: str, events: list[Decoded], mode: Mode) -> list[Outcome]:
        async with self.sessions() as session:
            ctx = HandlerContext(session=session, consumer=consumer)
            async with session.begin():
                batch = ConsumerBatch(consumer, self.registry, self.policy, ctx, mode)
                outcomes = await batch.run(events)
            # committed: the effects, dedup records and versions are durable together
        await _run_after_commit(ctx)
        return outcomes

    async def _record_poison(self, poison: list[Poison]) -> None:
        rows = [failure_row("", p.record, p.envelope, p.error.reason, p.error) for p in poison]
        async with self.sessions() as session, session.begin():
            await insert_ignore(session, failed_event, rows)
        for p in poison:
            log.warning("poison record %s (%s): %s", p.record.position, p.error.reason, p.error)


async def _run_after_commit(ctx: HandlerContext) -> None:
    for callback in ctx._after_commit:
        try:
            await callback()
        except Exception:
            log.exception(
                "%s: after-commit callback failed (the transaction stays committed)", ctx.consumer
            )
