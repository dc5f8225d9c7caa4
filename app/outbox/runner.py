"""Run a relay from the settings: in the worker (``RELAY_ENABLED``) or as its own process.

``RelayRunner`` owns what a relay needs besides its loop: a small engine of its
own (so a busy pipeline pool never starves it), the producer, the periodic
sample of the outbox for the metrics. ``start`` returns at once; the relay
connects to the broker in the background, retrying while it is unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from sqlalchemy import false, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.engine import create_engine, dispose, session_factory
from app.db.error_code import error_code
from app.db.said import remedy
from app.db.tables import outbox_event
from app.db.urls import shown
from app.errors import BrokerDenied
from app.kafka_clients import KafkaClients
from app.monitoring import readiness
from app.outbox.broker import BrokerRefused, KafkaBroker
from app.outbox.monitor import keep_sampling
from app.outbox.relay import Relay, RelayConfig, RelayStopped
from app.outbox.topics import TopicMaker
from app.pipeline.pause import Backoff, OnPause
from app.scrub import said
from app.settings import Settings

log = logging.getLogger("effectively_once.relay")
RELAY_POOL_SIZE = 2


def relay_config(settings: Settings) -> RelayConfig:
    """The relay's knobs from ``RELAY_*`` (and the infrastructure back-off)."""
    return RelayConfig(
        batch_size=settings.relay_batch_size,
        max_attempts=settings.relay_max_attempts,
        lease_seconds=settings.relay_lease_seconds,
        poll_interval=settings.relay_poll_interval_seconds,
        idle_poll_max=settings.relay_idle_poll_max_seconds,
        attempt_backoff=Backoff(
            settings.relay_backoff_initial_seconds, settings.relay_backoff_max_seconds
        ),
        pause_backoff=Backoff(
            settings.infra_retry_initial_seconds,
            settings.infra_retry_max_seconds,
            settings.infra_retry_jitter,
        ),
        stop_grace=settings.relay_stop_grace_seconds,
    )


def short_lease(settings: Settings) -> str | None:
    """Why ``RELAY_LEASE_SECONDS`` is too short to outlast a silent connection, or None.

    A relay whose connection goes silent after it published learns it only at its
    response deadline, then reconnects; a lease that expires first lets another relay
    claim the rows and publish them again."""
    outlasts = settings.db_response_timeout_seconds + settings.db_connect_timeout_seconds
    if settings.relay_lease_seconds > outlasts:
        return None
    return (
        f"RELAY_LEASE_SECONDS ({settings.relay_lease_seconds:g}) is not longer than "
        f"DB_RESPONSE_TIMEOUT_SECONDS plus DB_CONNECT_TIMEOUT_SECONDS ({outlasts:g}): a relay "
        "whose database connection goes silent after it published loses its rows to another "
        "relay, which publishes them again"
    )


@dataclass
class RelayRunner:
    """A relay over ``DATABASE_URL`` publishing to ``BROKER_URL``, with its sampler."""

    settings: Settings
    on_pause: OnPause | None = None
    on_progress: Callable[[], None] | None = None  # after every cycle that ended
    sample: bool = True
    engine: AsyncEngine = field(init=False)
    broker: KafkaBroker = field(init=False)
    relay: Relay = field(init=False)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list, init=False)
    failure: BaseException | None = field(default=None, init=False)
    # Why the broker could not be reached, while the relay keeps trying.
    _unreachable: str | None = field(default=None, init=False)
    # What the ACLs deny the producer at start (InitProducerId), while the relay keeps trying.
    _denied: str | None = field(default=None, init=False)
    # The failure the relay last paused on (a database that does not answer), until a cycle ends.
    _paused_on: str | None = field(default=None, init=False)
    _remedy: str | None = field(default=None, init=False)  # what to do about that pause

    def __post_init__(self) -> None:
        settings = self.settings
        self.engine = create_engine(settings.database_url, RELAY_POOL_SIZE, settings.db_timeouts)
        config = relay_config(settings)
        self.broker = KafkaBroker(
            KafkaClients.from_settings(settings),
            idempotent=settings.relay_idempotent,
            client_id=config.owner,
        )
        topics = TopicMaker.of(settings) if settings.topics_declare else None
        self.relay = Relay(
            session_factory(self.engine),
            self.broker,
            config,
            on_pause=self._paused,
            topics=topics,
            on_progress=self._progressed,
        )

    def _paused(self, what: str, exc: BaseException, delay: float) -> None:
        self._paused_on = said(exc)
        self._remedy = remedy(exc)
        if self.on_pause is not None:
            self.on_pause(what, exc, delay)

    def _progressed(self) -> None:
        self._paused_on = None
        self._remedy = None
        if self.on_progress is not None:
            self.on_progress()

    def start(self) -> None:
        """Run the relay (and the outbox sampler) in the background."""
        metrics.initialise_outbox()
        self._tasks.append(asyncio.ensure_future(self._run()))
        if self.sample:
            self._tasks.append(asyncio.ensure_future(keep_sampling(self.engine)))
        log.info(
            "relay %s started: database %s, broker %s (%s), batches of %d, lease %.0fs",
            self.relay.owner,
            shown(self.settings.database_url),
            self.settings.broker_url,
            self.settings.broker_security.describe(),
            self.settings.relay_batch_size,
            self.settings.relay_lease_seconds,
        )
        warning = short_lease(self.settings)
        if warning:
            log.warning("%s", warning)

    def wake(self) -> None:
        """Rows were just committed: claim now."""
        self.relay.wake()

    async def declare(self, topics: Collection[str]) -> None:
        """Create those of ``topics`` the broker lacks (the worker's handlers name them in
        ``emits``), unless ``TOPICS_DECLARE=false``; one refused is named by ``health`` at
        once. A broker out of reach is only logged: the relay creates them on first use."""
        maker = self.relay.topics
        if not topics or maker is None:
            return
        try:
            refused = await maker.create(topics)
        except Exception as exc:
            log.warning(
                "could not declare the topics the handlers emit to (%s): %s; the relay "
                "creates them before its first publish",
                ", ".join(sorted(topics)),
                f"{type(exc).__name__}: {exc}",
            )
            return
        for topic, why in refused.items():
            self.relay.missing_topics[topic] = f"creating it was refused: {why}"

    def health(self) -> readiness.Check:
        """The ``relay`` check of ``/ready``: the relay runs, its cycles keep ending, and every
        topic it has rows for exists.

        Failed: it stopped on an error it cannot retry (a setting or producer the broker
        refused); the cluster's ACLs deny it a write its rows wait for, or its producer
        (named, with the permission: it waits in place and resumes once granted); it waits
        on a database failure that waiting alone will not mend (``app.db.said.remedy``: a database
        that does not exist, PgBouncer's transaction mode without ``pgbouncer=true``); a
        topic it has rows for is missing and could not be created (named, with
        the broker's reason: those rows wait); the database has no ``outbox_event`` table
        (never migrated); or no claim-publish-settle cycle has ended
        for ``RELAY_STALL_SECONDS`` (a broker it cannot reach, a database that does not
        answer, a cycle that hangs): rows that are due then wait, and nothing else would
        say so."""
        if self.failure is not None:
            return readiness.Check("relay", False, f"the relay cannot run: {self.failure}")
        if self._tasks and self._tasks[0].done() and not self.relay.stopping:
            return readiness.Check("relay", False, "the relay stopped")
        denied = sorted({*self.relay.denied.values(), *([self._denied] if self._denied else [])})
        if denied:
            return readiness.Check(
                "relay", False, f"{'; '.join(denied)}: its rows wait in place until it is granted"
            )
        if self.relay.schema_missing:
            return readiness.Check(
                "relay",
                False,
                "the database has no outbox_event table: run the migrations "
                "(python -m app.db.migrate); the relay checks again meanwhile",
            )
        if self.relay.missing_topics:
            named = "; ".join(
                f"topic {topic!r} does not exist on the broker ({why})"
                for topic, why in sorted(self.relay.missing_topics.items())
            )
            return readiness.Check("relay", False, f"{named}: its rows wait")
        if self._remedy is not None:  # waiting alone will not mend it: said at once
            return readiness.Check(
                "relay", False, f"it waits, paused on {self._paused_on}: {self._remedy}"
            )
        idle = time.monotonic() - self.relay.last_cycle_at
        if idle > self.settings.relay_stall_seconds:
            why = f": cannot reach the broker ({self._unreachable})" if self._unreachable else ""
            if self._paused_on and not why:
                why = f": it waits, paused on {self._paused_on}"
            return readiness.Check("relay", False, f"no relay cycle ended for {idle:.0f}s{why}")
        return readiness.Check(
            "relay", True, f"last cycle {idle:.1f}s ago, {self.relay.published} row(s) published"
        )

    async def wait(self) -> None:
        """Until the relay stopped (after ``stop``, or a setting the broker refused)."""
        if self._tasks:
            await asyncio.wait([self._tasks[0]])

    async def stop(self) -> None:
        """Finish the rows in hand, release the rest, close the producer (which delivers or
        fails what it still holds), write what became of those rows, close the engine."""
        self.relay.stop()
        if self._tasks:
            for task in self._tasks[1:]:  # the sampler; the relay itself ends on its own
                task.cancel()
            # Not ``await task``: a cancellation of the caller must reach the caller, not be
            # taken for the end of a task it cancelled (nor cut the relay's wind-down).
            await asyncio.wait(self._tasks)
            self._tasks = []
        await self.broker.stop()
        await self.relay.finish()
        await dispose(self.engine)
        log.info("relay %s stopped: %d row(s) published", self.relay.owner, self.relay.published)

    async def _run(self) -> None:
        try:
            await self._connect()
            await self._check_grants()
            await self.relay.run()
        except RelayStopped:
            pass
        except BrokerRefused as exc:
            self._fail(exc)
            log.error("the relay cannot run: %s", exc)
        except Exception as exc:  # a bug: said once, on /ready and in the metrics, not retried
            self._fail(exc)
            refused = privileges_refused(exc)
            if refused is not None:  # a grant missing: one line, no traceback
                log.error("the relay cannot run: %s", refused)
            else:
                log.exception("the relay stopped on an error")

    async def _check_grants(self) -> None:
        """Ask the database once whether this login may update the outbox (an UPDATE of no
        row, rolled back): a role with SELECT alone ran, ``/ready`` green, until its first
        row's claim was refused. A refusal raises (one line, as at a claim); anything else
        (the database out of reach, no table yet) is left to the cycles, which say it."""
        statement = update(outbox_event).values(status=outbox_event.c.status).where(false())
        try:
            async with self.engine.connect() as conn:
                await conn.execute(statement)
                await conn.rollback()
        except Exception as exc:
            if privileges_refused(exc) is not None:
                raise
            log.debug("the start's check of the outbox's grants: %r", exc)

    def _fail(self, exc: BaseException) -> None:
        self.failure = exc
        metrics.relay_failed(True)

    async def _connect(self) -> None:
        backoff = self.relay.config.pause_backoff
        attempt = 0
        while True:
            try:
                await self.broker.start()
                self._unreachable = self._denied = None
                return
            except BrokerRefused:
                raise
            except BrokerDenied as exc:
                attempt += 1
                delay = backoff.delay(attempt)
                self._denied = str(exc)
                log.error(
                    "the relay waits (attempt %d), trying again in %.1fs: %s", attempt, delay, exc
                )
                metrics.relay_infrastructure_failure("broker")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self.relay.stopped()
                if self.relay.stopping:
                    raise RelayStopped from None
                continue
            except Exception as exc:
                attempt += 1
                delay = backoff.delay(attempt)
                self._unreachable = f"{type(exc).__name__}: {exc}"
                log.error(
                    "the relay cannot reach the broker at %s (attempt %d), retrying in %.1fs: %s",
                    self.settings.broker_url,
                    attempt,
                    delay,
                    f"{type(exc).__name__}: {exc}",
                )
                metrics.relay_infrastructure_failure("broker")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self.relay.stopped()
                if self.relay.stopping:
                    raise RelayStopped from None


# PostgreSQL's insufficient_privilege; MySQL/MariaDB's command, column and database denied.
_PRIVILEGES = {"42501", 1142, 1143, 1044}


def privileges_refused(exc: BaseException) -> str | None:
    """What the database refused this login, in one line naming the grant to add, when
    ``exc`` is a refused privilege; None otherwise."""
    orig = getattr(exc, "orig", None)
    if error_code(orig) not in _PRIVILEGES:
        return None
    lines = str(orig).strip().splitlines()
    reason = lines[0] if lines else type(orig).__name__
    return (
        f"the database refuses this login: {reason}; grant its role SELECT and UPDATE on "
        "outbox_event (README: The outbox and the relay)"
    )
