"""``Harness``: the worker's batch processor over a database, fed by hand, with no broker."""

from __future__ import annotations

import difflib
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson
from sqlalchemy import MetaData, Table, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine, dialect_name, session_factory
from app.db.migrate import upgrade_to_head
from app.db.refusal import refusal
from app.db.said import driver_said
from app.db.tables import (
    aggregate_version,
    consumed_event,
    failed_event,
    outbox_event,
    parked_event,
)
from app.db.urls import normalise_database_url, shown
from app.errors import ConfigurationError
from app.failure_detail import FailureDetail, FailureDetailPolicy
from app.handler_modules import check_specs, import_handler_modules, imported_by, listed
from app.outbox.message import Message, message_of
from app.outbox.status import RECORD_AGGREGATE_TYPE
from app.pipeline.after_commit import AfterCommitFailure
from app.pipeline.outcomes import Outcome
from app.pipeline.pause import Backoff
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.records import RawRecord
from app.registry import Registry, default_registry
from app.settings import (
    DEFAULT_AGGREGATE_TYPE,
    DEFAULT_APP_ID,
    DEFAULT_HANDLER_TIMEOUT_SECONDS,
    UnseenAggregatePolicy,
)
from app.testing.feed import Records
from dlq.policy import RetryPolicy
from dlq.topics import RETRY_INFIX, dlt_topic
from schemas.registry import is_known_event_type, known_event_types

# Infrastructure pauses (a locked SQLite file, say) last a millisecond in tests.
TINY_BACKOFF = Backoff(initial=0.001, maximum=0.001, jitter=0.0)
DEFAULT_TOPIC = "order-event-topic"
DEFAULT_DELAYS = (1.0, 5.0, 30.0, 300.0)
PAUSES_BEFORE_RAISING = 5
# The framework's tables that a fresh database has empty.
_STATE_TABLES = (consumed_event, aggregate_version, parked_event, failed_event, outbox_event)


class InfrastructurePaused(RuntimeError):
    """A ``send`` or ``retry`` kept pausing on an infrastructure failure (a database that
    refuses, a handler statement that never finishes): where a worker would wait for it
    to recover, a test is told why."""


class Harness:
    """Runs handlers exactly as the worker does (decode, dedup, version gate, apply, route
    failures, outbox), on SQLite or on the database you name, with no broker.

    ``modules`` are imported like ``HANDLER_MODULES`` (from the current directory first)
    and only their handlers run; or pass a ``registry`` of your own. The database gets
    the framework's migrations and each module's ``migrations/`` folder, then the
    ``tables`` you add (metadata of tables without migrations). Without a
    ``database_url``, a SQLite file in a temporary folder, removed on ``close``; a URL
    you give is read as ``DATABASE_URL`` is (``postgresql://``, ``mysql://``...) and
    must name a database that exists and holds none of the framework's rows, unless
    ``reuse`` (a second harness going on from a first's rows, as a restarted worker
    would). ``app_id``: the deployment its retry and DLT records name (``dlt-app-id``), as
    ``APP_ID`` does a worker's. ``handler_timeout``: the seconds a handler's calls may run
    before they are cancelled and the event retried, as ``HANDLER_TIMEOUT_SECONDS`` does
    a worker's (``None``: no limit). ``default_aggregate_type``: the aggregate type of a
    record that names none, as ``DEFAULT_AGGREGATE_TYPE``. ``failure_detail``: what of a
    handler's exception its failure records and log line keep, as ``FAILURE_DETAIL``; here
    ``full`` by default, so a failing handler's stack trace is logged (pytest shows it with
    the failed test) and its DLT record carries it. Each parameter stands for the setting
    a worker reads from its environment; the harness reads none of them, so a test says
    what it runs with.

    ``send`` returns the outcome values (``Kind``: applied, duplicate, stale, parked,
    retried with the retry topic as ``detail``, dead-lettered with its ``dlt-reason``,
    poison), raises ``UnknownEventType`` for an envelope of a type no model declares (a
    misspelling), and ``InfrastructurePaused`` where a worker would pause and retry in
    place (after ``PAUSES_BEFORE_RAISING`` pauses, the failure its cause); ``retry``
    delivers the retry records the failures wrote, as their tier would; ``rows``,
    ``emitted``, ``records`` and ``dead_letters`` read what was committed;
    ``after_commit_failures`` lists each after-commit callback that raised or overran
    (``AfterCommitFailure``: consumer, callback, error), which a worker only logs, the
    transaction committed and the outcome ``applied``. Use it as
    ``async with Harness("revenue") as h: ...``.
    """

    def __init__(
        self,
        *modules: str,
        database_url: str | None = None,
        registry: Registry | None = None,
        tables: Sequence[MetaData] = (),
        topic: str = DEFAULT_TOPIC,
        retry_delays: Sequence[float] = DEFAULT_DELAYS,
        clock: Callable[[], datetime] | None = None,
        unseen_aggregate_policy: UnseenAggregatePolicy = UnseenAggregatePolicy.FROM_ONE,
        reuse: bool = False,
        app_id: str = DEFAULT_APP_ID,
        handler_timeout: float | None = DEFAULT_HANDLER_TIMEOUT_SECONDS,
        default_aggregate_type: str = DEFAULT_AGGREGATE_TYPE,
        failure_detail: FailureDetail = FailureDetail.FULL,
    ) -> None:
        if not modules and registry is None:
            raise ConfigurationError("Harness: name the handler modules, or give a registry")
        if handler_timeout is not None and handler_timeout < 0:
            raise ConfigurationError(
                f"Harness: handler_timeout is seconds (0 or None: no limit), got {handler_timeout}"
            )
        self.reuse = reuse
        self.app_id = app_id
        self.handler_timeout = handler_timeout or None  # 0: no limit, as for a worker
        self.default_aggregate_type = default_aggregate_type
        self.failure_detail = FailureDetail(failure_detail)
        self.modules = modules
        self.topic = topic
        self.retry_delays = tuple(retry_delays)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.policy = unseen_aggregate_policy
        self.feed = Records(topic)
        self._tables = tables
        self._folder: Path | None = None
        if database_url is None:
            self._folder = Path(tempfile.mkdtemp(prefix="effectively-once-test-"))
            database_url = f"sqlite+aiosqlite:///{self._folder / 'service.db'}"
        try:
            self.database_url = normalise_database_url(database_url)
        except ValueError as exc:
            raise ConfigurationError(f"Harness: database_url: {exc}") from None
        self._registry = registry
        self._engine: AsyncEngine | None = None
        self._processor: BatchProcessor | None = None
        self._delivered: set[int] = set()  # outbox ids of retry records delivered already
        self._pauses = 0  # infrastructure pauses in the current send or retry
        # What a worker only logs: each after-commit callback that raised or overran.
        self.after_commit_failures: list[AfterCommitFailure] = []

    async def __aenter__(self) -> Harness:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> Harness:
        """Import the modules, migrate the database, add ``tables``; a start that fails leaves
        nothing behind (the temporary SQLite folder removed)."""
        try:
            return await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> Harness:
        if self._registry is None:
            import_handler_modules(self.modules)
            # As the worker refuses to start: a handler registered from a module outside the
            # list that one of them imports would run without its migrations.
            reached = imported_by(self.modules)
            check_specs(
                [s for s in default_registry.specs() if s.fn.__module__ in reached], self.modules
            )
            self._registry = registry_of(default_registry, self.modules)
        try:
            await upgrade_to_head(self.database_url, self.modules)
        except ConfigurationError:
            raise
        except Exception as exc:  # the database is missing, refuses us, or is out of reach
            raise ConfigurationError(
                f"Harness: cannot use the database at {shown(self.database_url)}: "
                f"{refusal(exc, self.database_url) or driver_said(exc)}"
            ) from None
        self._engine = create_engine(self.database_url)
        if not self.reuse:
            await self._check_empty()
        if self._tables:
            async with self._engine.begin() as conn:
                for metadata in self._tables:
                    await conn.run_sync(metadata.create_all)
        return self

    async def _check_empty(self) -> None:
        """``ConfigurationError`` if the framework's tables hold rows (an earlier run's): its
        dedup records and versions would turn this test's events into duplicates."""
        held = []
        async with self.engine.connect() as conn:
            for table in _STATE_TABLES:
                count = (await conn.execute(select(func.count()).select_from(table))).scalar()
                if count:
                    held.append(f"{table.name}: {count}")
        if held:
            await self.close()
            raise ConfigurationError(
                f"Harness: the database at {shown(self.database_url)} holds rows of an earlier "
                f"run ({', '.join(held)}); name an empty database (drop and create it), or "
                "pass reuse=True to go on from them"
            )

    async def close(self) -> None:
        """Release the connections; remove the temporary SQLite folder."""
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    @property
    def engine(self) -> AsyncEngine:
        """The database's engine, for reads of your own."""
        if self._engine is None:
            raise RuntimeError("Harness: start it first (async with Harness(...) as h)")
        return self._engine

    @property
    def registry(self) -> Registry:
        """The handlers that run."""
        if self._registry is None:
            raise RuntimeError("Harness: start it first (async with Harness(...) as h)")
        return self._registry

    def processor(self, delays: Sequence[float] | None = None, **overrides: Any) -> BatchProcessor:
        """A new batch processor over the database and the handlers, failures routed through
        ``delays`` (default the harness's ``retry_delays``) with its clock; ``overrides``
        are ``BatchProcessor`` fields."""
        tiers = self.retry_delays if delays is None else tuple(delays)
        options: dict[str, Any] = {
            "router": FailureRouter(
                RetryPolicy(self.topic, tiers),
                clock=self.clock,
                detail=FailureDetailPolicy(self.failure_detail),
                app_id=self.app_id,
            ),
            "app_id": self.app_id,
            "default_aggregate_type": self.default_aggregate_type,
            "handler_timeout": self.handler_timeout,
            "policy": self.policy,
            "backoff": TINY_BACKOFF,
            "on_pause": self._paused,
            "on_after_commit_failure": self.after_commit_failures.append,
            "concurrent_consumers": dialect_name(self.database_url) != "sqlite",
        }
        options.update(overrides)
        return BatchProcessor(session_factory(self.engine), self.registry, **options)

    async def send(
        self,
        *events: Mapping[str, Any] | bytes | RawRecord,
        consumer: str | None = None,
        unknown_types: bool = False,
    ) -> list[Outcome]:
        """Process ``events`` as one batch (envelopes, raw bytes or records, in this order
        on one partition); returns what happened to each, per consumer: ``consumer``'s only
        if named (and poison, which is no consumer's: ``Kind.POISON``, consumer ``""``).

        An envelope (a mapping) whose ``eventType`` no payload model declares raises
        ``UnknownEventType``: a worker takes it as another service's event and runs no
        handler, so a misspelt type would pass as ``Kind.APPLIED``. ``unknown_types=True``
        sends such envelopes on purpose; bytes and records are never checked."""
        self._known(consumer)
        if not unknown_types:
            for envelope in events:
                if isinstance(envelope, Mapping):
                    _declared(envelope)
        if self._processor is None:
            self._processor = self.processor()
        self._pauses = 0
        found = await self._processor.process([self.feed.of(e) for e in events])
        return _for(found, consumer)

    def _paused(self, what: str, exc: BaseException, _delay: float) -> None:
        """A worker pauses on an infrastructure failure until it recovers; a test stops after
        ``PAUSES_BEFORE_RAISING`` of them in one call, with the failure as the cause."""
        self._pauses += 1
        if self._pauses >= PAUSES_BEFORE_RAISING:
            raise InfrastructurePaused(
                f"{what} paused {self._pauses} times on an infrastructure failure, as a worker "
                f"would until it recovers: {type(exc).__name__}: {exc}"
            ) from exc

    async def retry(self, consumer: str | None = None) -> list[Outcome]:
        """Deliver the retry records the outbox holds and that were not delivered yet, as their
        tier would once due; returns the outcomes (a failure again goes on to the next tier,
        or to the DLT after the last), ``consumer``'s only if named."""
        return await self._deliver(lambda topic: RETRY_INFIX in topic, consumer)

    async def deliver_emitted(self, consumer: str | None = None) -> list[Outcome]:
        """Deliver the events the handlers emitted (``ctx.emit``) to the harness's topic and
        that were not delivered yet, as the relay and the broker bring them back to a worker
        reading that topic; returns the outcomes, ``consumer``'s only if named. Events
        emitted to other topics are another worker's (``emitted`` shows them)."""
        return await self._deliver(lambda topic: topic == self.topic, consumer)

    async def _deliver(self, topics: Callable[[str], bool], consumer: str | None) -> list[Outcome]:
        """Process, as one batch, the outbox's records for ``topics`` not delivered yet."""
        self._known(consumer)
        due = [
            (row_id, message)
            for row_id, message in await self._outbox()
            if topics(message.topic) and row_id not in self._delivered
        ]
        self._delivered.update(row_id for row_id, _ in due)
        if not due:
            return []
        if self._processor is None:
            self._processor = self.processor()
        self._pauses = 0
        found = await self._processor.process([self.feed.delivered(m) for _, m in due])
        return _for(found, consumer)

    def _known(self, consumer: str | None) -> None:
        """``ValueError`` for a ``consumer`` no handler names: its outcomes would be none, and
        a test's ``all(...)`` over them would pass whatever happened."""
        if not consumer or consumer in self.registry.consumers:
            return  # "": poison's only
        names = sorted(self.registry.consumers)
        close = difflib.get_close_matches(consumer, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"Harness: no handler here is for consumer {consumer!r}; {hint}"
            f"the consumers are {', '.join(map(repr, names))}"
        )

    async def rows(self, table: Table, **where: Any) -> list[dict[str, Any]]:
        """The committed rows of ``table`` whose columns equal ``where``, as dicts."""
        stmt = select(table)
        for name, value in where.items():
            stmt = stmt.where(table.c[name] == value)
        async with self.engine.connect() as conn:
            return [dict(row) for row in (await conn.execute(stmt)).mappings()]

    async def emitted(self, topic: str | None = None) -> list[dict[str, Any]]:
        """The envelopes the handlers emitted (``ctx.emit``) and committed, in order; only
        those for ``topic`` if given. The framework's retry and DLT records are not here."""
        async with self.engine.connect() as conn:
            query = (
                select(outbox_event.c.topic, outbox_event.c.payload)
                .where(outbox_event.c.aggregate_type != RECORD_AGGREGATE_TYPE)
                .order_by(outbox_event.c.id)
            )
            found = (await conn.execute(query)).all()
        return [orjson.loads(payload) for to, payload in found if topic in (None, to)]

    async def records(self, topic: str | None = None) -> list[Message]:
        """Every record the outbox holds (what the relay would publish), in order; only those
        for ``topic`` if given."""
        return [m for _, m in await self._outbox() if topic in (None, m.topic)]

    async def dead_letters(self) -> list[Message]:
        """The records written to the dead-letter topic: failed events' and poison's."""
        return await self.records(dlt_topic(self.topic))

    async def _outbox(self) -> list[tuple[int, Message]]:
        async with self.engine.connect() as conn:
            query = select(outbox_event).order_by(outbox_event.c.id)
            found = [dict(row) for row in (await conn.execute(query)).mappings()]
        return [(row["id"], message_of(row)) for row in found]


class UnknownEventType(ValueError):
    """``Harness.send`` was given an envelope of an ``eventType`` no model declares."""


def _declared(envelope: Mapping[str, Any]) -> None:
    """Raise ``UnknownEventType`` if ``envelope``'s type (either spelling) has no model."""
    event_type = envelope.get("eventType", envelope.get("event_type"))
    if not isinstance(event_type, str) or is_known_event_type(event_type):
        return
    close = difflib.get_close_matches(event_type, sorted(known_event_types()), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownEventType(
        f"no payload model declares eventType {event_type!r}{hint}: a worker would take it "
        "as another service's event and run no handler; send(..., unknown_types=True) "
        "sends it so on purpose"
    )


def _for(outcomes: list[Outcome], consumer: str | None) -> list[Outcome]:
    """``consumer``'s outcomes and poison's (``None``: all)."""
    if consumer is None:
        return outcomes
    return [o for o in outcomes if o.consumer in (consumer, "")]


def registry_of(registry: Registry, modules: Sequence[str]) -> Registry:
    """The handlers of ``registry`` written in ``modules`` (a package covers its submodules)."""
    only = Registry()
    for spec in registry.specs():
        module = spec.fn.__module__
        if listed(module, modules):
            only.add(spec)
    if not only.consumers:
        raise ConfigurationError(f"Harness: no @handler registered by {', '.join(modules)}")
    return only
