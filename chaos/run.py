"""One soak: its own services, the workers, the load, the faults, the drain, the verdict.

Everything it starts it also stops, whatever happens (Ctrl-C and SIGTERM
included), and the database it created it drops. Logs stay in the working
directory after a failure or when asked to.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiokafka.errors import KafkaError
from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError

from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.demo.produce import ensure_topic
from chaos import tally
from chaos.brokers import ChaosBrokers
from chaos.commands import CommandFailed
from chaos.database import ChaosDatabase, ServerUnavailable, server
from chaos.faults import Injector, Targets
from chaos.group import wait_until_assigned
from chaos.outbox_source import OutboxSource
from chaos.outcome import Outcome
from chaos.profile import Profile
from chaos.proxy import TcpProxy
from chaos.redis import ChaosRedis
from chaos.report import print_table, write_json
from chaos.schedule import FaultKind, Planned, plan
from chaos.scrape import Scraper
from chaos.source import DirectProducer, Source
from chaos.verify import unpublished, verify
from chaos.watch import ProgressWatch
from chaos.workers import WorkerPool
from chaos.workload import Workload, generate

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_HOME = Path(tempfile.gettempdir()) / "effectively-once-chaos"
SESSION_TIMEOUT_SECONDS = 6  # Tansu holds a group join for half of it
DRAIN_POLL_SECONDS = 1.0
SOURCES = ("direct", "outbox")  # the producer sides ``--source`` names (``chaos.source``)
# What a soak may meet from the outside; anything else is a bug of the soak (a traceback).
EXPECTED_FAILURES = (
    CommandFailed,
    KafkaError,
    SQLAlchemyError,
    TimeoutError,
    OSError,
    RuntimeError,
)


class CannotRun(RuntimeError):
    """The soak cannot run here (a tool missing, its ports taken, another soak running)."""


@dataclass(frozen=True)
class Options:
    """One soak's knobs (see ``python -m chaos --help``)."""

    profile: Profile
    backend: str = "postgresql"
    home: Path = DEFAULT_HOME
    json_out: Path | None = None
    keep: bool = False
    broker: str = "kafka"  # or "tansu" (see app.demo.local)
    source: str = "direct"  # one of SOURCES


async def run_soak(options: Options, console: Console) -> int:
    """Run the soak, print its table; 0 only when the final state is exact."""
    options.home.mkdir(parents=True, exist_ok=True)
    with _only_soak(options.home / "lock"):
        workdir = Path(tempfile.mkdtemp(prefix="eo-chaos-"))
        console.print(f"[dim]logs in {workdir}[/]")
        _log_to(workdir / "soak.log")
        with console.status("generating the workload"):
            workload = await asyncio.to_thread(generate, options.profile.shape)
        outcome = Outcome(options.profile, options.backend, "", workload, options.broker)
        started = time.monotonic()
        try:
            await _soak(options, console, workload, workdir, outcome)
        except ServerUnavailable as exc:
            raise CannotRun(str(exc)) from None
        except EXPECTED_FAILURES as exc:
            outcome.failure = f"{type(exc).__name__}: {exc}"
        finally:
            outcome.wall_seconds = time.monotonic() - started
            outcome.load_average = os.getloadavg()
        print_table(console, outcome)
        if options.json_out is not None:
            write_json(options.json_out, outcome)
        if outcome.exact and not options.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            console.print(f"[dim]logs kept in {workdir}[/]")
        return 0 if outcome.exact else 1


@dataclass
class _Stage:
    """The soak's own services, up and reachable, on which the workers will run."""

    tag: str
    database: ChaosDatabase
    name: str  # the run's database
    redis: ChaosRedis
    brokers: ChaosBrokers
    database_proxy: TcpProxy
    topic: str

    @property
    def bootstrap(self) -> str:
        """The brokers' addresses for every client: their proxies (the nodes advertise them)."""
        return self.brokers.bootstrap

    @property
    def broker_url(self) -> str:
        """``BROKER_URL`` through the proxies."""
        return self.brokers.url


async def _soak(
    options: Options, console: Console, workload: Workload, workdir: Path, outcome: Outcome
) -> None:
    profile = options.profile
    async with AsyncExitStack() as stack:
        stage = await _set_stage(options, console, workdir, stack)
        workers = WorkerPool(profile.workers, _worker_env(profile, stage), workdir)
        stack.callback(workers.stop)
        with console.status(f"starting {profile.workers} workers"):
            workers.start()
            await wait_until_assigned(workers, stage.topic, profile.partitions)
        source = await _source(options, stage, workdir, stack)
        outcome.source = source.label
        await source.start()
        stack.push_async_callback(source.stop)
        await _window(profile, console, workload, stage, workers, source, outcome)
        outcome.stopped = workers.stop()
        with console.status("reading back the database and the topics"):
            outcome.findings = await verify(
                stage.database.url(stage.name), stage.broker_url, stage.topic, workload
            )


async def _source(options: Options, stage: _Stage, workdir: Path, stack: AsyncExitStack) -> Source:
    """The producer side ``options`` name; ``outbox``: the order service's database is one
    of its own on the soak's server (``stack`` drops it), its relays reach it through the
    database proxy."""
    if options.source == "direct":
        return DirectProducer(stage.bootstrap, stage.topic)
    name = f"{stage.name}_orders"
    await stage.database.create_database(name)
    if not options.keep:
        stack.push_async_callback(stage.database.drop_database, name)
    await upgrade_to_head(stage.database.url(name))
    profile = options.profile
    relay_env = {
        **_worker_env(profile, stage),
        "DATABASE_URL": stage.database.url(name, port=stage.database_proxy.port),
        "RELAY_METRICS_PORT": "0",  # two relays on one host
    }
    return OutboxSource(
        stage.database.url(name), relay_env, workdir, stage.bootstrap, stage.topic,
        profile.partitions,
    )  # fmt: skip


async def _set_stage(
    options: Options, console: Console, workdir: Path, stack: AsyncExitStack
) -> _Stage:
    """Start the soak's database, Redis, broker and proxies; ``stack`` stops them again."""
    tag = uuid.uuid4().hex[:8]
    with console.status(f"starting the soak's own {options.backend} and Redis"):
        database = server(options.backend, options.home)
        await database.start()
        stack.push_async_callback(database.stop)
        name = f"chaos_{tag}"
        await database.create_database(name)
        if not options.keep:
            stack.push_async_callback(database.drop_database, name)
        await _prepare(database.url(name))
        redis = ChaosRedis(options.home, workdir / "redis.log")
        await redis.start()
        stack.push_async_callback(redis.stop)
    profile = options.profile
    brokers = ChaosBrokers.create(options.broker, profile, workdir)
    # The proxies listen first: the nodes of a cluster reach each other through them.
    stack.callback(brokers.stop_proxies)
    brokers.start_proxies()
    nodes = f"{profile.brokers} nodes of " if profile.brokers > 1 else ""
    with console.status(f"starting the soak's own broker ({nodes}{options.broker})"):
        try:
            brokers.broker.start()
        except (RuntimeError, OSError) as exc:
            raise CannotRun(f"the {options.broker} broker did not start: {exc}") from None
    stack.callback(brokers.broker.stop)
    database_proxy = TcpProxy("127.0.0.1", database.port).start()
    stack.callback(database_proxy.stop)
    topic = f"chaos-orders-{tag}"
    stage = _Stage(tag, database, name, redis, brokers, database_proxy, topic)
    await ensure_topic(stage.bootstrap, topic, profile.partitions, profile.replication_factor)
    return stage


async def _window(
    profile: Profile,
    console: Console,
    workload: Workload,
    stage: _Stage,
    workers: WorkerPool,
    source: Source,
    outcome: Outcome,
) -> None:
    """Offer the load while the faults strike, then wait for the group to catch up."""
    targets = Targets(
        workers, stage.database, stage.database_proxy, stage.brokers, stage.redis, stage.topic,
        source.processes,
    )  # fmt: skip
    injector = Injector(targets, seed=profile.shape.seed, started=workers.clock)
    faults = plan(profile, relays=source.processes is not None)
    outcome.planned = dict(_count(faults))
    watch = ProgressWatch(
        stage.bootstrap, f"chaos-{stage.tag}", stage.topic, profile.partitions,
        source.ends, started=workers.clock,
    )  # fmt: skip
    scraper = Scraper(workers.web_ports, workers.incarnation, started=workers.clock)
    background = [
        asyncio.create_task(workers.supervise()),
        asyncio.create_task(watch.run()),
        asyncio.create_task(scraper.run()),
    ]
    try:
        with console.status(
            f"chaos window: {len(workload.records):,} records at {profile.rate:g}/s, "
            f"{len(faults)} faults"
        ):
            window_start = injector.now()
            await asyncio.gather(
                source.feed(workload.records, profile.rate),
                injector.run(faults, window_start),
            )
        window_end = time.monotonic()
        with console.status("waiting for the group to catch up, and the outbox to empty"):
            outcome.drain_seconds = await _drain(
                watch, stage.database.url(stage.name), window_end, profile.drain_timeout
            )
        outcome.pending_at_end = watch.pending
        await scraper.scrape_once()
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        outcome.ledger = list(injector.ledger)
        outcome.stall = watch.tracker.longest
        outcome.samples = list(watch.samples)
        outcome.loads = list(watch.loads)
        outcome.exits = list(workers.exits)
        outcome.worker_totals = scraper.totals()
        outcome.hang = scraper.longest_hang()
        outcome.resends = source.resends


async def _prepare(url: str) -> None:
    """The framework's schema, the example consumers' tables and the tally's table."""
    await upgrade_to_head(url, ["handlers"])
    engine = create_engine(url, pool_size=1)
    try:
        await tally.create_table(engine)
    finally:
        await engine.dispose()


def _worker_env(profile: Profile, stage: _Stage) -> dict[str, str]:
    """Every worker's environment: all its connections but Redis's go through a proxy."""
    pythonpath = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {
        "PYTHONPATH": os.pathsep.join(pythonpath),
        "PYTHONUNBUFFERED": "1",
        "BROKER_URL": stage.broker_url,
        "DATABASE_URL": stage.database.url(stage.name, port=stage.database_proxy.port),
        "REDIS_URL": stage.redis.url,
        "ORDER_TOPIC": stage.topic,
        "ORDER_TOPIC_PARTITIONS": str(profile.partitions),
        "APP_ID": f"chaos-{stage.tag}",
        "HANDLER_MODULES": f"handlers,{tally.__name__}",
        "CONSUMERS": "",
        "RETRY_DELAYS": "1,5",  # a wrongly routed event reaches the DLT within the soak
        "BROKER_SESSION_TIMEOUT_SECONDS": str(SESSION_TIMEOUT_SECONDS),
        "APP_WEB_STATS_ENABLED": "true",  # faust's /assignment/ page: who owns what
        # Tansu 0.6 has no InitProducerId; Apache Kafka runs the default.
        "RELAY_IDEMPOTENT": str(stage.brokers.broker.idempotent).lower(),
        # The retry tiers and the DLT are replicated as the order topic is.
        "TOPIC_REPLICATION_FACTOR": str(profile.replication_factor),
        # Shorter than the broker's outage: the relays' leases expire while they wait on it.
        "RELAY_LEASE_SECONDS": f"{profile.relay_lease_seconds:g}",
    }


async def _drain(
    watch: ProgressWatch, database_url: str, window_end: float, limit: float
) -> float | None:
    """Seconds until the group committed everything the source sent and the workers'
    relays published every outbox row they wrote (their DLT records); None: not in time."""
    deadline = window_end + limit
    while time.monotonic() < deadline:
        if watch.drained_since(window_end) and not await unpublished(database_url):
            return time.monotonic() - window_end
        await asyncio.sleep(DRAIN_POLL_SECONDS)
    return None


def _count(faults: list[Planned]) -> Counter[FaultKind]:
    return Counter(fault.kind for fault in faults)


def _log_to(path: Path) -> None:
    """The soak's own log lines (its Kafka clients' included) go to ``path``, not the terminal."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)


@contextmanager
def _only_soak(path: Path) -> Iterator[None]:
    """One soak at a time on this machine: its services have fixed ports."""
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CannotRun(f"another soak is running (it holds {path})") from None
        yield
