"""The relay: claim due outbox rows, publish them in aggregate order, mark them published.

One cycle (``run_once``):

1. claim up to ``batch_size`` rows in one transaction (``claim``: per aggregate a
   chain of its earliest unpublished rows, ``PROCESSING`` under this relay's lease);
   the rows are locked first, and the transaction marks them and commits in the
   background; nothing of the claim goes out before that commit (a claim that fails
   to commit sends nothing: no other relay's claim of its rows can meet a copy of
   ours on the topic);
2. publish them in *waves*: wave ``k`` holds the ``k``-th row of every chain, and
   is sent only once every row of wave ``k - 1`` was acknowledged (``acks=all``), so
   an aggregate's row never reaches the broker before the row ahead of it did;
   different aggregates travel together in one wave;
3. settle in one transaction: acknowledged rows ``PUBLISHED``; a row the broker
   refused, or that cannot be a record (payload not JSON, topic missing), counts an
   attempt (``PENDING`` until ``next_retry_at``, exponential back-off, ``DEAD`` after
   ``max_attempts``) and its chain's later rows go back to ``PENDING`` unsent. In
   ``run`` a cycle settles while the next one claims and publishes, and with a backlog
   the next claim is made while a cycle publishes (``step``).

A row's topic missing on the broker is created first where the relay may
(``topics``, ``app.outbox.topics``); one that stays missing fails its rows'
attempts, and ``missing_topics`` names it with the reason until it exists.

The broker or the database being unreachable is nobody's attempt, and so is a
write the cluster's ACLs deny (``denied`` names the topic and permission until a
send to it succeeds): the relay waits and tries again in place, keeping its lease
alive (renewed every third of the lease) so that no other relay takes the rows
while it waits. A relay that dies holding a lease loses it when the lease expires;
the rows are then claimed again, and a row whose record the broker already took from
the dead relay is found on the topic and marked published without a second copy
(``app.outbox.recovered``; beyond its search window, sent again: at least once,
consumers dedup).

Between cycles the relay sleeps ``poll_interval`` unless the last claim was full
(longer while it keeps finding nothing), or ``wake()`` is called (the worker does
after a commit that wrote rows).

``stop()``: no wave is sent once ``stop_grace`` seconds have passed, and the wait for
acknowledgements ends then too; the rows never sent go back to ``PENDING``. A row whose
record was sent and not yet acknowledged is neither: the producer may still deliver
it, so it stays ``PROCESSING`` under the lease until ``finish()``, called once the
producer has closed (and so delivered or failed every record it held), writes its
outcome. Released early, it would be claimed and sent again while its first copy
still reached the topic; marked published, it would be lost if that copy never did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import metrics
from app.db.dialect import backend
from app.db.said import driver_said, remedy
from app.outbox import settle
from app.outbox.broker import MAX_RECORD_BYTES, breaks_sequence, denial, is_row_fault
from app.outbox.by_status import topics_waited_for
from app.outbox.claim import Aggregate, Floor, lock_claimable, mark_processing
from app.outbox.lease import Lease
from app.outbox.message import BadRow, Message, message_of, shortened
from app.outbox.topics import TopicMaker
from app.outbox.written import write_time
from app.pipeline.classify import is_infrastructure
from app.pipeline.pause import Backoff, OnPause
from app.pipeline.together import CutShort, abandon, unless_cut
from app.scrub import scrub

T = TypeVar("T")
Clock = Callable[[], datetime]
log = logging.getLogger("effectively_once.relay")
STOP_GRACE_SECONDS = 5.0
# How often a database call of a stopping relay checks whether it is to be cut short.
_CHECK_STOP_SECONDS = 0.25
WAIT_LOG_SECONDS = 30.0  # a relay waiting on the broker says so this often
# What the broker (RecordTooLargeError) or the producer itself (MessageSizeTooLargeError)
# says of a record over the limit.
TOO_LARGE = frozenset({"RecordTooLargeError", "MessageSizeTooLargeError"})
MISSING_RECHECK_SECONDS = 10.0  # a topic found missing is looked for again this often
NOT_CREATED = "TOPICS_DECLARE=false: the relay creates no topic"


class Broker(Protocol):
    """Where the relay sends (``app.outbox.broker.KafkaBroker``, or a fake in tests)."""

    async def missing_topics(self, topics: set[str]) -> set[str]:
        """Which of ``topics`` do not exist."""
        ...

    async def send_many(self, messages: Sequence[Message]) -> list[asyncio.Future[Any] | Exception]:
        """Queue ``messages``; each one's outcome is a future that completes on the broker's
        acknowledgement (or refusal), or the error that kept it from being queued."""
        ...

    async def already_sent(self, wanted: Mapping[int, tuple[Message, datetime | None]]) -> set[int]:
        """Of ``wanted`` (row id -> record, row's ``created_at``), the rows whose record is on
        its topic already (rows a dead relay held: ``app.outbox.recovered``)."""
        ...

    async def renew(self) -> None:
        """After a refusal that broke an idempotent producer's sequence: a new producer."""
        ...


@dataclass(frozen=True)
class RelayConfig:
    """How one relay claims and retries (the ``RELAY_*`` settings)."""

    batch_size: int = 2_000
    max_attempts: int = 10
    lease_seconds: float = 60.0
    poll_interval: float = 0.05
    idle_poll_max: float = 0.25
    attempt_backoff: Backoff = field(default_factory=lambda: Backoff(1.0, 300.0))
    pause_backoff: Backoff = field(default_factory=Backoff)
    owner: str = field(default_factory=lambda: default_owner())
    stop_grace: float = STOP_GRACE_SECONDS


def default_owner() -> str:
    """``host:pid:random``: names this relay's leases."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"[:100]


class RelayStopped(Exception):
    """The relay was asked to stop while it waited."""


@dataclass
class _Cycle:
    """The rows of one claim, the lease on them (renewed by ``keeper`` until settled), and
    what became of each."""

    rows: list[dict[str, Any]]
    lease: Lease | None = None
    keeper: asyncio.Future[None] | None = None
    # The claim's commit (its rows PROCESSING); a claim made ahead commits while the cycle
    # before it publishes.
    marking: asyncio.Future[None] | None = None
    # The wait for ``marking`` was cut short by a stop: nothing of the claim is sent or
    # settled (its rows are PENDING, or PROCESSING under the lease if it committed).
    cut: bool = False
    published: list[dict[str, Any]] = field(default_factory=list)
    failed: list[settle.Failed] = field(default_factory=list)
    stopped: set[tuple[str, str]] = field(default_factory=set)
    # Sent, not acknowledged when the stop's grace ran out: the outcome is the producer's.
    unanswered: dict[int, tuple[dict[str, Any], asyncio.Future[Any]]] = field(default_factory=dict)
    # Rows taken over from an expired lease, and how many of them were on the topic already.
    recovered: int = 0
    recovered_sent: int = 0

    def waves(self) -> list[list[dict[str, Any]]]:
        """Wave ``k``: the ``k``-th claimed row of each aggregate (claim order is id order)."""
        waves: list[list[dict[str, Any]]] = []
        depth: dict[tuple[str, str], int] = {}
        for row in self.rows:
            agg = (row["aggregate_type"], row["aggregate_id"])
            level = depth.get(agg, 0)
            depth[agg] = level + 1
            if level == len(waves):
                waves.append([])
            waves[level].append(row)
        return waves

    def fail(self, row: Mapping[str, Any], error: str, final: bool = False) -> None:
        self.failed.append(settle.Failed(row["id"], row["retry_count"], error, final))
        self.stopped.add((row["aggregate_type"], row["aggregate_id"]))

    def wait_for(self, row: dict[str, Any], future: asyncio.Future[Any]) -> None:
        self.unanswered[row["id"]] = (row, future)
        self.stopped.add((row["aggregate_type"], row["aggregate_id"]))

    def take(
        self, row: dict[str, Any], future: asyncio.Future[Any], message: Message | None = None
    ) -> bool:
        """Record the outcome of ``row``'s send (of ``message``, when known); False when
        ``future`` holds a failure that is nobody's attempt (the broker could not be
        reached)."""
        error = future.exception()
        if error is None:
            self.published.append(row)
        elif is_row_fault(error):
            self.fail(row, _refused(error, message), final=isinstance(error, BadRow))
        else:
            return False
        return True

    def unsent(self) -> list[int]:
        done = {row["id"] for row in self.published} | {f.id for f in self.failed}
        done |= set(self.unanswered)
        return [row["id"] for row in self.rows if row["id"] not in done]


class Relay:
    """Ships one database's outbox to the broker; ``run`` until ``stop``."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        broker: Broker,
        config: RelayConfig | None = None,
        clock: Clock = lambda: datetime.now(UTC),
        on_pause: OnPause | None = None,
        topics: TopicMaker | None = None,
        on_progress: Callable[[], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.broker = broker
        self.topics = topics
        # Topics rows were due for and the broker does not have -> why (until they exist).
        self.missing_topics: dict[str, str] = {}
        self._missing_checked_at = 0.0
        # Topics the ACLs do not let this relay write -> the denial, while rows wait for it.
        self.denied: dict[str, str] = {}
        # The database answered without an outbox_event table (never migrated): until a
        # cycle ends.
        self.schema_missing = False
        self.config = config or RelayConfig()
        self.clock = clock
        self.on_pause = on_pause
        self.on_progress = on_progress  # told after every cycle that ended (a pause is over)
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._stop_at: float | None = None
        self._settling: asyncio.Future[None] | None = None  # the last cycle's settlement
        self._ahead: asyncio.Future[_Cycle | None] | None = None  # the next claim, made early
        # Rows of this relay's cycles claimed and not settled yet: no claim of its own takes
        # them again, even after their lease expired while a settlement waited.
        self._held: dict[int, Aggregate] = {}
        self._unanswered: dict[int, tuple[dict[str, Any], asyncio.Future[Any]]] = {}
        self._floor = Floor()
        self.published = 0  # rows this relay marked PUBLISHED
        self._zero_time_said = False  # a producer's zero created_at, warned of once
        # When the last claim-publish-settle cycle ended (monotonic), empty ones included.
        self.last_cycle_at = time.monotonic()

    @property
    def owner(self) -> str:
        """The name on this relay's leases."""
        return self.config.owner

    def wake(self) -> None:
        """Claim again now rather than after the poll interval (rows were just written)."""
        self._wake.set()

    def stop(self) -> None:
        """Finish the rows in hand (up to ``stop_grace`` seconds), then return from ``run``;
        then ``finish`` once the broker has closed."""
        if not self._stop.is_set():
            self._stop_at = time.monotonic()
            self._stop.set()
            self._wake.set()

    async def stopped(self) -> None:
        """Return once ``stop`` was called."""
        await self._stop.wait()

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called."""
        return self._stop.is_set()

    async def run(self) -> None:
        """Claim, publish and settle until stopped.

        After a full claim the next one follows at once; after one that found rows,
        ``poll_interval`` after the last one *started* (a cycle longer than that is
        followed at once: rows written during it are due, and a pause on top of the
        cycle would only add to their wait); after each empty one the wait doubles, up
        to ``idle_poll_max``, so an idle relay costs the database little (``wake`` ends
        the wait at once: the worker calls it after writing rows; a wake during a cycle
        makes the next one start as soon as it ends).

        A cycle's settlement, and after a full claim the next claim, overlap the cycle
        that publishes (``step``)."""
        try:
            await self._cycles()
        finally:
            await self._wind_down()

    async def _cycles(self) -> None:
        pause = self.config.poll_interval
        while not self.stopping:
            started = time.monotonic()
            # Cleared as the cycle starts, not after it: a wake that arrives during the
            # cycle (rows committed meanwhile) then starts the next one at once.
            self._wake.clear()
            try:
                claimed = await self.step()
            except RelayStopped:
                break
            self.last_cycle_at = time.monotonic()
            if self.on_progress is not None:
                self.on_progress()
            # A denied write holds its cycle until it goes: a cycle that ended waits on none.
            self.denied.clear()
            self.schema_missing = False
            metrics.relay_polled()
            await self.recheck_missing()
            if claimed >= self.config.batch_size:
                pause = self.config.poll_interval
                continue
            pause = (
                self.config.poll_interval
                if claimed
                else min(pause * 2, max(self.config.idle_poll_max, self.config.poll_interval))
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, pause - (time.monotonic() - started))):
                    await self._wake.wait()
            if self._wake.is_set():
                pause = self.config.poll_interval

    async def run_once(self) -> int:
        """One claim, its publication and its settlement; returns how many rows it claimed."""
        cycle = await self._claimed()
        if cycle is None:
            return 0
        await self._publish_cycle(cycle)
        await self._end(cycle)
        return len(cycle.rows)

    async def step(self) -> int:
        """One cycle of ``run``; returns how many rows it claimed.

        Three stages overlap, each at most one cycle at a time: a cycle's settlement runs
        in the background while the next cycle claims and publishes, and after a full
        claim (a backlog) the next claim is made while this cycle publishes. A cycle's
        rows are ``PROCESSING`` under this relay's lease from its claim until its
        settlement commits, so a claim made meanwhile takes none of them, nor any later
        row of their aggregates (the claim's rule, as for another relay): the database's
        work and the broker's acknowledgements overlap, and each aggregate's rows still
        go out one after another."""
        cycle = await self._next_claim()
        if cycle is None:
            await self._settled()
            return 0
        if len(cycle.rows) >= self.config.batch_size:
            self._ahead = asyncio.ensure_future(self._claimed())
        await self._publish_cycle(cycle)
        await self._settled()
        self._settling = asyncio.ensure_future(self._end(cycle))
        return len(cycle.rows)

    async def _next_claim(self) -> _Cycle | None:
        """The claim made ahead, if any, or a new one."""
        ahead, self._ahead = self._ahead, None
        return await (ahead if ahead is not None else self._claimed())

    async def _settled(self) -> None:
        """Wait for the settlement in flight, if any (raises what it raised)."""
        settling, self._settling = self._settling, None
        if settling is not None:
            await settling

    async def _wind_down(self) -> None:
        """Hand back a claim made ahead and never published, then wait for the settlement
        in flight."""
        ahead, self._ahead = self._ahead, None
        try:
            if ahead is not None:
                with contextlib.suppress(RelayStopped):
                    cycle = await ahead
                    if cycle is not None:
                        await self._end(cycle)  # nothing of it was sent: back to PENDING
        finally:
            await self._settled()

    async def _claimed(self) -> _Cycle | None:
        """Claim one cycle's rows (None: nothing claimed); the lease on them is kept from
        now until ``_end`` settles them.

        The claim's rows are locked in its transaction, and their marking as
        ``PROCESSING`` commits in the background (``_mark``): a claim made ahead returns
        as soon as its rows are locked, and commits while the cycle in hand publishes.
        Until it commits, the locks keep every other claim from its rows and from their
        aggregates' later rows, as the committed lease does after; the cycle sends
        nothing before then (``_publish_cycle``), and ``_end`` waits for it too."""
        if self.stopping:
            return None
        taken = time.monotonic()
        now = self.clock()
        until = now + timedelta(seconds=self.config.lease_seconds)
        session, rows, tx = await self._db_open(
            "claiming outbox rows",
            lambda s: lock_claimable(s, now, self.config.batch_size, self._floor, self._held),
        )
        if not rows:
            try:
                await tx.aclose()  # nothing locked, nothing written
            except Exception as exc:  # the connection lost as it closed: the next claim pauses
                log.debug("closing an empty claim failed: %s", _describe(exc))
            return None
        self._held.update((row["id"], (row["aggregate_type"], row["aggregate_id"])) for row in rows)
        lease = Lease(
            self.sessions,
            self.owner,
            [row["id"] for row in rows],
            self.config.lease_seconds,
            self.clock,
            taken,
        )
        marking = asyncio.ensure_future(self._mark(session, tx, rows, until, lease))
        if backend(session) == "sqlite":  # one writer: no settlement could run meanwhile
            await asyncio.wait([marking])
        return _Cycle(rows, lease, keeper=asyncio.ensure_future(lease.keep()), marking=marking)

    async def _mark(
        self,
        session: AsyncSession,
        tx: contextlib.AsyncExitStack,
        rows: list[dict[str, Any]],
        until: datetime,
        lease: Lease,
    ) -> None:
        """Mark the claim's locked rows ``PROCESSING`` and commit. If that fails, nothing of
        the claim is sent (the rows are unlocked, perhaps never marked: another claim may
        take them), and the settlement writes only what this relay holds."""
        try:
            async with tx:
                await mark_processing(session, self.owner, rows, self.clock(), until)
        except BaseException as exc:
            # Cancelled too: the transaction rolled back, and nothing of it may go out.
            lease.lost.update(row["id"] for row in rows)
            if not isinstance(exc, Exception):
                raise
            log.warning(
                "the claim of %d outbox row(s) did not commit (%s): none of them was sent, "
                "and they are claimed again",
                len(rows),
                _describe(exc),
            )

    async def _publish_cycle(self, cycle: _Cycle) -> None:
        """Publish ``cycle`` wave by wave; settle it at once if this fails or is cancelled.

        Nothing goes out before the claim has committed: a record sent while the claim's
        hold on its row is not yet durable would, were the commit lost (the database
        crashed, the connection cut), leave the row ``PENDING`` with its record on the
        topic, and the next relay to claim it would send it again, unaware."""
        try:
            if not await self._claim_committed(cycle):
                return
            for wave in cycle.waves():
                if self.stopping and self._grace_over():
                    break
                await self._publish(self._still_held(wave, cycle), cycle)
            if cycle.recovered:  # said once a cycle, not once a wave
                log.info(
                    "%d row(s) taken over from an expired lease: %d already on the topic (not "
                    "sent again), %d to send",
                    cycle.recovered,
                    cycle.recovered_sent,
                    cycle.recovered - cycle.recovered_sent,
                )
        except BaseException:
            await self._end(cycle)
            raise

    async def _end(self, cycle: _Cycle) -> None:
        """Stop renewing the cycle's lease and settle its rows (once its claim committed)."""
        committed = await self._claim_committed(cycle)
        if cycle.keeper is not None:
            cycle.keeper.cancel()
            await asyncio.wait([cycle.keeper])  # a cancellation of this task still propagates
        try:
            if committed:
                await self._settle(cycle)
            else:
                log.warning(
                    "stopped before the claim of %d outbox row(s) committed: none of them "
                    "was sent (claimed again, once the lease expires if it did commit)",
                    len(cycle.rows),
                )
        finally:
            for row in cycle.rows:
                self._held.pop(row["id"], None)
        if cycle.unanswered:
            self._unanswered.update(cycle.unanswered)
            log.warning(
                "stopped while %d record(s) awaited their acknowledgement: their rows "
                "stay claimed until the producer has closed",
                len(cycle.unanswered),
            )
        metrics.relay_batch(len(cycle.rows))

    def _still_held(self, rows: Sequence[dict[str, Any]], cycle: _Cycle) -> list[dict[str, Any]]:
        """Of ``rows``, those this relay may still send: its aggregate not stopped, the row's
        lease provably held (``Lease.holds``). A row it cannot prove it holds stops its
        aggregate for this cycle: another relay may have published a later row of it."""
        live = []
        for row in rows:
            agg = (row["aggregate_type"], row["aggregate_id"])
            if agg in cycle.stopped:
                continue
            if cycle.lease is not None and not cycle.lease.holds(row["id"]):
                cycle.stopped.add(agg)
                continue
            live.append(row)
        return live

    # --- publishing -----------------------------------------------------------------------

    async def _publish(self, wave: list[dict[str, Any]], cycle: _Cycle) -> None:
        """Send one wave until every row in it was acknowledged or failed on its own account."""
        pending: dict[int, tuple[dict[str, Any], Message]] = {}
        for row in wave:
            try:
                pending[row["id"]] = (row, message_of(row))
            except BadRow as exc:  # no attempt can mend its columns: DEAD at once
                cycle.fail(row, str(exc), final=True)
        if not pending:
            return
        await self._fail_missing(pending, cycle)
        await self._leave_out_sent(pending, cycle)
        attempt = 0
        while pending:
            # Checked before every try: the waits above and the pause below may outlast it.
            held = {row["id"] for row in self._still_held([r for r, _ in pending.values()], cycle)}
            for row_id in [row_id for row_id in pending if row_id not in held]:
                del pending[row_id]
            if not pending:
                return
            before = {row_id: message for row_id, (_, message) in pending.items()}
            trouble = await self._send_all(pending, cycle)
            if not pending or self.stopping:
                return
            if trouble is None and any(m is not before.get(i) for i, (_, m) in pending.items()):
                continue  # shortened records go again at once
            attempt += 1
            topics = {message.topic for _, message in pending.values()}
            denied = sorted(said for topic, said in self.denied.items() if topic in topics)
            await self._pause(
                f"publishing {len(pending)} outbox row(s)",
                trouble,
                attempt,
                denied="; ".join(denied) or None,
            )
            # A topic deleted meanwhile fails its rows' attempts (or is created again),
            # rather than holding the cycle, and every row behind it, for ever.
            await self._fail_missing(pending, cycle)

    async def _fail_missing(
        self, pending: dict[int, tuple[dict[str, Any], Message]], cycle: _Cycle
    ) -> None:
        """Fail (an attempt each) and leave out the rows of ``pending`` whose topic the broker
        lacks and the relay could not create."""
        missing = await self._missing({message.topic for _, message in pending.values()})
        for row_id, (row, message) in list(pending.items()):
            if message.topic in missing:
                why = missing[message.topic]
                cycle.fail(row, f"topic {message.topic!r} does not exist on the broker ({why})")
                del pending[row_id]

    async def _missing(self, topics: set[str]) -> dict[str, str]:
        """Which of ``topics`` the broker lacks, each with why; creates them first where the
        relay may. Remembered in ``missing_topics`` until they exist."""
        missing = await self._broker_call(
            "asking the broker for its topics", lambda: self.broker.missing_topics(topics)
        )
        refused: dict[str, str] = {}
        if missing and self.topics is not None:
            maker = self.topics
            refused = await self._broker_call(
                f"creating topic(s) {', '.join(sorted(missing))}", lambda: maker.create(missing)
            )
            missing = await self._broker_call(
                "asking the broker for its topics", lambda: self.broker.missing_topics(topics)
            )
        found = {topic: self._why_missing(topic, refused) for topic in missing}
        for topic in topics - missing:
            self.missing_topics.pop(topic, None)
        self.missing_topics.update(found)
        return found

    def _why_missing(self, topic: str, refused: Mapping[str, str]) -> str:
        if self.topics is None:
            return NOT_CREATED
        if topic in refused:
            return f"creating it was refused: {refused[topic]}"
        return "created, but the broker does not list it yet"

    async def recheck_missing(self) -> None:
        """Forget the missing topics that exist now (created by someone else, say), and those
        no row waits for any more (each went ``DEAD``, or was deleted)."""
        if not self.missing_topics:
            return
        if time.monotonic() - self._missing_checked_at < MISSING_RECHECK_SECONDS:
            return
        self._missing_checked_at = time.monotonic()
        try:
            still = await self.broker.missing_topics(set(self.missing_topics))
        except Exception:  # the broker out of reach: asked again next time
            return
        if still:
            waited_for = await self._db(
                "reading which missing topics rows wait for",
                lambda session: topics_waited_for(session, still),
            )
            still &= waited_for
        for topic in set(self.missing_topics) - still:
            del self.missing_topics[topic]

    async def _leave_out_sent(
        self, pending: dict[int, tuple[dict[str, Any], Message]], cycle: _Cycle
    ) -> None:
        """Rows taken over from a dead relay's lease whose record is on the topic already are
        published: marked so, not sent a second time."""
        wanted = {
            row_id: (message, write_time(row["created_at"]))
            for row_id, (row, message) in pending.items()
            if row.get("recovered")
        }
        if not wanted:
            return
        found = await self._broker_call(
            "looking for records a dead relay may have sent",
            lambda: self.broker.already_sent(wanted),
        )
        for row_id in found:
            cycle.published.append(pending.pop(row_id)[0])
        cycle.recovered += len(wanted)
        cycle.recovered_sent += len(found)

    async def _send_all(
        self, pending: dict[int, tuple[dict[str, Any], Message]], cycle: _Cycle
    ) -> BaseException | None:
        """One try at ``pending``; removes what is settled, returns the last broker trouble."""
        trouble: BaseException | None = None
        futures: dict[int, asyncio.Future[Any]] = {}
        ids = list(pending)
        outcomes = await self.broker.send_many([pending[row_id][1] for row_id in ids])
        for row_id, outcome in zip(ids, outcomes, strict=True):
            if not isinstance(outcome, Exception):
                futures[row_id] = outcome
                continue
            row, message = pending[row_id]
            if self._shorten(pending, row_id, outcome):
                continue
            if is_row_fault(outcome):
                cycle.fail(row, _refused(outcome, message))
                del pending[row_id]
            elif self._denied(message.topic, outcome) or is_infrastructure(outcome):
                trouble = outcome  # a denial first: remembered, and said on /ready
            else:
                raise outcome
        await self._await_acks(list(futures.values()))
        await self._renew_if_broken(futures.values())
        refused = [row_id for row_id, f in futures.items() if _too_large(f)]
        if len(refused) > 1:
            # The broker refuses a whole batch as too large for one record in it: each goes
            # again in a batch of its own, so that only the one too large fails.
            for row_id in refused:
                futures[row_id] = await self._alone(pending[row_id][1])
        for row_id, future in futures.items():
            row, message = pending[row_id]
            if not future.done():
                # Stopping, the grace ran out: the producer still holds the record.
                cycle.wait_for(row, future)
                del pending[row_id]
            elif future.exception() is not None and self._shorten(
                pending, row_id, future.exception()
            ):
                continue
            elif cycle.take(row, future, message):
                if future.exception() is None:
                    self.denied.pop(message.topic, None)
                del pending[row_id]
            else:
                trouble = future.exception()
                self._denied(message.topic, trouble)
        return trouble

    async def _renew_if_broken(self, futures: Iterable[asyncio.Future[Any]]) -> None:
        """A new producer when the broker refused a batch (``breaks_sequence``)."""
        if any(f.done() and not f.cancelled() and breaks_sequence(f.exception()) for f in futures):
            await self._broker_call("renewing the producer", self.broker.renew)

    async def _alone(self, message: Message) -> asyncio.Future[Any]:
        """``message`` sent in a batch of its own: its acknowledgement is awaited. A send that
        raises (no metadata yet, a denial) comes back as a future holding that error, which
        the caller sorts as any refusal (the row's, a denial, an outage)."""
        [outcome] = await self.broker.send_many([message])
        if isinstance(outcome, Exception):
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            future.set_exception(outcome)
            return future
        future = outcome
        await self._await_acks([future])
        await self._renew_if_broken([future])
        return future

    def _denied(self, topic: str, exc: BaseException | None) -> bool:
        """Remember it when ``exc`` says the ACLs deny writing ``topic``; True if so."""
        said = denial(exc, topic)
        if said is not None:
            self.denied[topic] = said
        return said is not None

    @staticmethod
    def _shorten(
        pending: dict[int, tuple[dict[str, Any], Message]], row_id: int, error: BaseException | None
    ) -> bool:
        """A retry or dead-letter record refused as too large is sent again, at once, with
        the framework's long headers cut; True when it was (it stays pending)."""
        if type(error).__name__ not in TOO_LARGE:
            return False
        row, message = pending[row_id]
        shorter = shortened(message)
        if shorter is None:
            return False
        log.warning(
            "outbox row %s: the broker refused the record as too large; sending it again "
            "without the failure's stack trace",
            row_id,
        )
        pending[row_id] = (row, shorter)
        return True

    async def _await_acks(self, futures: Sequence[asyncio.Future[Any]]) -> None:
        """Wait for every future, renewing the lease meanwhile; gives up only when stopping,
        ``stop_grace`` seconds after ``stop`` (called before or during the wait)."""
        waiting = [f for f in futures if not f.done()]
        if not waiting:
            return
        renew_every = self.config.lease_seconds / 3
        started, said = time.monotonic(), -math.inf
        acked = asyncio.ensure_future(asyncio.wait(waiting))  # cancelling it leaves them be
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            while not acked.done():
                if self.stopping:
                    left = self.config.stop_grace - self._since_stop()
                    if left <= 0:
                        return
                    await asyncio.wait([acked], timeout=left)
                    continue
                await asyncio.wait(
                    [acked, stop], timeout=renew_every, return_when=asyncio.FIRST_COMPLETED
                )
                if acked.done() or self.stopping:
                    continue
                waited = time.monotonic() - started
                if waited - said >= WAIT_LOG_SECONDS:
                    said = waited
                    log.warning(
                        "waiting %.0fs for the broker to acknowledge %d record(s) "
                        "(their rows stay this relay's while its lease is renewed)",
                        waited,
                        sum(1 for f in waiting if not f.done()),
                    )
                    metrics.relay_infrastructure_failure("broker")  # it does not answer
            if said > -math.inf and acked.done():
                failed = sum(1 for f in waiting if f.cancelled() or f.exception() is not None)
                log.warning(
                    "the broker answered after %.0fs: %d record(s) acknowledged, %d failed",
                    time.monotonic() - started,
                    len(waiting) - failed,
                    failed,
                )
        finally:
            acked.cancel()
            stop.cancel()

    # --- settling -------------------------------------------------------------------------

    async def finish(self) -> None:
        """Write the outcome of the rows whose record was still unacknowledged when the
        stop's grace ran out; call it after ``run`` returned and the broker was closed.

        Closing the producer (``KafkaBroker.stop``) delivers what it held, or fails it:
        acknowledged rows are ``PUBLISHED``, refused ones count an attempt, the others go
        back to ``PENDING``. A row still without an answer stays ``PROCESSING`` under the
        lease: whoever claims it once the lease expired looks for its record on the topic
        before sending it again (``app.outbox.recovered``)."""
        unanswered, self._unanswered = self._unanswered, {}
        if not unanswered:
            return
        cycle = _Cycle([row for row, _ in unanswered.values()])
        for row, future in unanswered.values():
            if not future.done() or future.cancelled():
                cycle.wait_for(row, future)
            else:
                cycle.take(row, future)
        await self._settle(cycle)
        if cycle.unanswered:
            log.warning(
                "%d row(s) stay PROCESSING: the broker never answered for their records; "
                "once the lease expires they are claimed again, looked for on the topic first",
                len(cycle.unanswered),
            )

    async def _settle(self, cycle: _Cycle) -> None:
        now = self.clock()
        published = [row["id"] for row in cycle.published]
        unsent = cycle.unsent()

        marked = 0

        async def write(session: AsyncSession) -> list[int]:
            nonlocal marked
            marked = await settle.mark_published(session, self.owner, published, now)
            if marked < len(published):
                log.warning(
                    "%d published row(s) had been taken over by another relay (lease expired) "
                    "before they were marked: it looks for their records on the topic before "
                    "it sends them",
                    len(published) - marked,
                )
            dead = await settle.record_failures(
                session,
                self.owner,
                cycle.failed,
                now,
                self.config.max_attempts,
                self.config.attempt_backoff,
            )
            await settle.release(session, self.owner, unsent, now)
            return dead

        try:
            dead = await self._db("marking outbox rows published", write, settling=True)
        except RelayStopped:
            log.warning(
                "stopped before the outcome of %d row(s) was written: they are claimed again "
                "once the lease expires",
                len(cycle.rows),
            )
            return
        self.published += marked
        self._latencies(cycle.published, now)
        by_error: dict[str, list[int]] = {}
        for failure in cycle.failed:
            by_error.setdefault(failure.error, []).append(failure.id)
        for error, ids in by_error.items():
            log.warning(
                "%d outbox row(s) not published (%s): %s",
                len(ids),
                ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else ""),
                error,
            )
        metrics.relay_row_failures(len(cycle.failed))
        if dead:
            metrics.relay_dead(len(dead))
            log.error(
                "%d outbox row(s) are DEAD, after %d attempts or at the first for a row that "
                "can never be a record (python -m app outbox list says why): %s",
                len(dead),
                self.config.max_attempts,
                ", ".join(map(str, dead[:20])),
            )

    def _latencies(self, rows: Sequence[Mapping[str, Any]], now: datetime) -> None:
        """Observe each published row's time from ``created_at``; a producer's zero value is
        no write time (its latency would be two thousand years): left out, said once."""
        written = [(row["id"], row["created_at"], write_time(row["created_at"])) for row in rows]
        metrics.relay_published(
            len(written), [(now - moment).total_seconds() for *_, moment in written if moment]
        )
        zero = next(((i, stored) for i, stored, moment in written if moment is None), None)
        if zero is not None and not self._zero_time_said:
            self._zero_time_said = True
            log.warning(
                "outbox row %s has created_at %s, a producer's zero value rather than when it "
                "was written: rows like it are published, and left out of "
                "effectively_once_outbox_publish_latency_seconds (said once)",
                *zero,
            )

    # --- waiting on infrastructure -------------------------------------------------------

    async def _db(
        self,
        what: str,
        work: Callable[[AsyncSession], Awaitable[T]],
        settling: bool = False,
    ) -> T:
        """``work`` in one transaction, retried in place while the database is unreachable."""
        attempt = 0
        while True:
            try:
                return await self._cut_when_stopping(
                    self._in_transaction(work), self.config.stop_grace
                )
            except RelayStopped:
                raise
            except Exception as exc:
                attempt += 1
                await self._wait_for_database(what, exc, attempt, settling)

    async def _in_transaction(self, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
        async with self.sessions() as session, session.begin():
            return await work(session)

    async def _db_open(
        self, what: str, work: Callable[[AsyncSession], Awaitable[T]]
    ) -> tuple[AsyncSession, T, contextlib.AsyncExitStack]:
        """``work`` in a transaction left open, retried in place while the database is
        unreachable: the session, what ``work`` returned, and the stack whose closing
        commits the transaction and closes the session."""
        attempt = 0
        while True:
            try:
                return await self._cut_when_stopping(self._opened(work), 0.0)
            except RelayStopped:
                raise
            except Exception as exc:
                attempt += 1
                await self._wait_for_database(what, exc, attempt)

    async def _opened(
        self, work: Callable[[AsyncSession], Awaitable[T]]
    ) -> tuple[AsyncSession, T, contextlib.AsyncExitStack]:
        tx = contextlib.AsyncExitStack()
        try:
            session = await tx.enter_async_context(self.sessions())
            await tx.enter_async_context(session.begin())
            return session, await work(session), tx
        except BaseException as exc:
            with contextlib.suppress(Exception):  # the rollback of a broken connection
                await tx.__aexit__(type(exc), exc, exc.__traceback__)
            raise

    async def _claim_committed(self, cycle: _Cycle) -> bool:
        """Wait for ``cycle``'s claim to commit; False when a stop cut the wait short
        (``stop_grace`` seconds after ``stop``, or after the wait began if later)."""
        marking = cycle.marking
        if cycle.cut or marking is None or marking.done():
            return not cycle.cut
        started = time.monotonic()
        try:
            await unless_cut(
                asyncio.wait([marking]),
                lambda: self._cut_due(started, self.config.stop_grace),
                _CHECK_STOP_SECONDS,
            )
        except CutShort:
            abandon(marking)
            cycle.cut = True
        return not cycle.cut

    def _cut_due(self, started: float, within: float) -> bool:
        """Whether what started at ``started`` (monotonic) is to be cut short: the relay is
        stopping and it ran ``within`` seconds since ``stop``, or since it started if later."""
        return self.stopping and time.monotonic() - max(started, self._stop_at or 0.0) >= within

    async def _cut_when_stopping(self, work: Awaitable[T], within: float) -> T:
        """``work``, cancelled and ``RelayStopped`` once the relay is stopping and it ran
        ``within`` seconds of that (since ``stop``, or since it started if later): a
        transaction waiting on a connection gone silent would otherwise hold the stop until
        the driver's deadlines end it. Not waited for once cancelled (its rollback on such a
        connection ends at those deadlines, in the background): a claim cut so commits
        nothing, and its rows stay ``PENDING``; a settlement cut so leaves its rows
        ``PROCESSING`` until the lease expires, looked for on the topic before they are sent
        again."""
        started = time.monotonic()
        try:
            return await unless_cut(
                work, lambda: self._cut_due(started, within), _CHECK_STOP_SECONDS
            )
        except CutShort:
            raise RelayStopped from None

    async def _wait_for_database(
        self, what: str, exc: Exception, attempt: int, settling: bool = False
    ) -> None:
        """After ``exc`` from a transaction of ``_db`` or ``_db_open``: raise it unless the
        database is out of reach (or not migrated yet), else wait before the next try."""
        if not (is_infrastructure(exc) or _missing_table(exc)):
            raise exc
        if settling and self.stopping and self._grace_over():
            raise RelayStopped from exc
        await self._pause(what, exc, attempt, dependency="database", settling=settling)

    async def _broker_call(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            try:
                return await call()
            except Exception as exc:
                attempt += 1
                await self._pause(what, exc, attempt)

    async def _pause(
        self,
        what: str,
        exc: BaseException | None,
        attempt: int,
        dependency: str = "broker",
        settling: bool = False,
        denied: str | None = None,
    ) -> None:
        delay = self.config.pause_backoff.delay(attempt)
        if denied is not None:
            log.error(
                "%s waits in place (attempt %d), trying again in %.1fs: %s",
                what,
                attempt,
                delay,
                denied,
            )
        elif _missing_table(exc):
            self.schema_missing = True
            log.error(
                "no outbox_event table in the database: run the migrations "
                "(python -m app.db.migrate); checking again in %.1fs",
                delay,
            )
        else:
            log.error(
                "%s failed (attempt %d, %s), retrying in %.1fs: %s",
                what,
                attempt,
                (remedy(exc) if exc is not None else None) or f"{dependency} unreachable?",
                delay,
                _describe(exc) if exc is not None else "no acknowledgement",
            )
        metrics.relay_infrastructure_failure(dependency)
        if self.on_pause is not None and exc is not None:
            self.on_pause(what, exc, delay)
        if settling:
            await asyncio.sleep(delay if not self.stopping else min(delay, 0.5))
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._stop.wait()
        if self.stopping:
            raise RelayStopped

    def _since_stop(self) -> float:
        return time.monotonic() - self._stop_at if self._stop_at is not None else 0.0

    def _grace_over(self) -> bool:
        return self._since_stop() >= self.config.stop_grace


def _too_large(future: asyncio.Future[Any]) -> bool:
    """Whether ``future`` failed with the broker's refusal of a record as too large."""
    if not future.done() or future.cancelled():
        return False
    return type(future.exception()).__name__ in TOO_LARGE


def _refused(error: BaseException, message: Message | None) -> str:
    """Why the broker refused ``message``: a record too large says its size and what
    decides the limit."""
    said = _describe(error)
    if type(error).__name__ not in TOO_LARGE or message is None:
        return said
    size = len(message.key or b"") + len(message.value or b"")
    size += sum(len(name) + len(value) for name, value in message.headers)
    if size > MAX_RECORD_BYTES or "max_request_size" in str(error):  # the producer's own
        return (
            f"{said}: the record is larger than the {MAX_RECORD_BYTES:,} bytes the relay sends "
            "at most (past that the broker would drop its connection): it cannot go as it is"
        )
    return (
        f"{said}: a record of {size:,} bytes, over what the topic {message.topic!r} accepts "
        "(its max.message.bytes, or the broker's message.max.bytes); raise it, then "
        "python -m app outbox requeue ID --execute"
    )


def _describe(exc: BaseException) -> str:
    """``Type: what it says`` in one line: a database error says what its driver said (not
    SQLAlchemy's statement and link), scrubbed."""
    name = type(exc).__name__
    text = driver_said(exc) if isinstance(exc, SQLAlchemyError) else scrub(str(exc)).strip()
    if not text:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


# The three databases' words for a missing outbox table (PostgreSQL's, MySQL's and
# MariaDB's, SQLite's), any schema before it: not any error whose statement names the table.
_NO_OUTBOX_TABLE = re.compile(
    r"""relation "(?:[^"]+\.)?outbox_event" does not exist"""
    r"""|Table '(?:[^']+\.)?outbox_event' doesn't exist"""
    r"""|no such table: (?:\w+\.)?outbox_event\b"""
)


def _missing_table(exc: BaseException | None) -> bool:
    return exc is not None and _NO_OUTBOX_TABLE.search(str(exc)) is not None
