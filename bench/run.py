"""One benchmark run: broker, database and topic set up once, the scenarios, the report.

The workload is produced once, onto one topic of one local broker; every
scenario reads that same topic from its start. Everything the run starts it
also stops, and the database it created it drops. After a failure the working
directory (broker and worker logs) is kept for inspection.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from aiokafka.errors import KafkaError
from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError

from app.demo.broker import LocalBroker
from app.demo.kafka import KafkaCluster
from app.demo.local import local_broker
from app.demo.produce import ensure_topic, produce
from app.demo.workload import Workload
from bench import relay
from bench.database import BenchDatabase, DatabaseError
from bench.latency import Latency, bare_latency, framework_latency
from bench.options import BenchOptions, Scenario
from bench.prefilter_keys import forget, require_redis
from bench.results import Row, with_ratios, write_json
from bench.scenarios import ONE, THREE, THREE_REDIS, bare, framework, storm, warm_up
from bench.session import BenchError, Session
from bench.table import print_table
from bench.worker import WorkerConfig
from bench.workload import describe, make_workload

# Enough rows for representative planner statistics (see ``scenarios.warm_up``).
WARM_UP_EVENTS = 20_000
EXPECTED_FAILURES = (BenchError, DatabaseError, KafkaError, SQLAlchemyError, OSError, RuntimeError)


async def run_bench(options: BenchOptions, console: Console) -> int:
    """Run the benchmark, print and write its results; 0 only if every scenario was correct."""
    workdir = Path(tempfile.mkdtemp(prefix="eo-bench-"))
    broker = local_broker(options.broker, log_path=workdir / "broker.log")
    database: BenchDatabase | None = None
    session: Session | None = None
    redis = Scenario.STORM_REDIS in options.scenarios
    keep = True
    try:
        if redis:
            await require_redis(options.redis_url)
        with console.status("generating the workload"):
            workload = make_workload(options.order_count)
        if options.database_url is None:
            database = await BenchDatabase.create(options.postgres_server)
        else:
            database = BenchDatabase.existing(options.database_url)
        await database.migrate()
        broker.start()
        session = await open_session(options, console, broker, database, workload, workdir)
        rows = with_ratios(await run_scenarios(session))
        keep = not all(row.correct for row in rows)
    except EXPECTED_FAILURES as exc:
        console.print(f"[bold red]✘ bench failed:[/] {exc}")
        console.print(f"[dim]logs kept in {workdir}[/]")
        return 1
    finally:
        broker.stop()
        if database is not None:
            await database.drop()
        if redis and session is not None:
            await forget(options.redis_url, session.prefilter_prefix)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report(console, options, rows, workload)
    if keep:
        console.print(f"[bold red]✘ a result is wrong[/]; logs kept in {workdir}")
        return 1
    return 0


async def open_session(
    options: BenchOptions,
    console: Console,
    broker: LocalBroker | KafkaCluster,
    database: BenchDatabase,
    workload: Workload,
    workdir: Path,
) -> Session:
    """Create the run's topic(s) and produce the workload onto each, once."""
    tag = uuid.uuid4().hex[:8]
    session = Session(
        options=options,
        broker=broker,
        database=database,
        workload=workload,
        config=WorkerConfig(
            broker_url=broker.url,
            topic=f"bench-orders-{tag}",
            partitions=options.partitions,
            batch_size=options.batch_size,
            batch_wait=options.batch_wait,
            relay_idempotent=broker.idempotent,
        ),
        workdir=workdir,
        tag=tag,
        console=console,
    )
    if Scenario.STORM_REDIS in options.scenarios:
        session.redelivery_topic = f"{session.config.topic}-again"
    for topic in filter(None, (session.config.topic, session.redelivery_topic)):
        await ensure_topic(broker.bootstrap, topic, options.partitions)
        started = time.monotonic()
        await produce(broker.bootstrap, topic, workload.messages)
        console.print(
            f"produced {session.messages:,} events ({workload.distinct_events:,} distinct) "
            f"onto {topic} ({options.partitions} partitions) in "
            f"{time.monotonic() - started:.1f} s"
        )
    console.print(f"database {database.name}, logs in {workdir}")
    return session


def report(console: Console, options: BenchOptions, rows: list[Row], workload: Workload) -> None:
    """Print the table and write the JSON file."""
    title = f"effectively-once throughput on {options.broker}" + (
        " (SMOKE: a tiny workload, checks correctness; the figures mean nothing)"
        if options.smoke
        else ""
    )
    print_table(console, rows, title)
    settings = {
        "broker": options.broker,
        "batch_size": options.batch_size,
        "batch_wait_seconds": options.batch_wait,
        "partitions": options.partitions,
        "latency_offered_share": options.latency_load if options.latency else None,
        "latency_seconds": options.latency_seconds if options.latency else None,
    }
    out = Path(options.json_out)
    write_json(out, rows, describe(workload), settings, options.smoke)
    console.print(f"results written to {out}")


async def run_scenarios(session: Session) -> list[Row]:
    """The chosen scenarios in order; latency runs last (they empty the tables)."""
    chosen, console = session.options.scenarios, session.console
    rows: list[Row] = []

    async def add(label: str, measuring: Awaitable[Row]) -> Row:
        with console.status(f"measuring: {label}"):
            row = await measuring
        mark = "[green]✔[/]" if row.correct else "[bold red]✘[/]"
        console.print(
            f"{mark} {row.label}: {row.events:,} events in {row.seconds:.2f} s "
            f"= {row.events_per_s:,.0f}/s — {row.detail}"
        )
        rows.append(row)
        return row

    # Each row that gets a latency figure, with how to measure it at a given rate.
    paced: list[tuple[Row, Callable[[float], Awaitable[Latency]]]] = []
    if chosen != (Scenario.BARE,):
        events = min(session.messages, WARM_UP_EVENTS)
        with console.status(f"warming up the database with {events:,} events"):
            await warm_up(session, events)
        console.print(f"warm-up: {events:,} events applied and ANALYZEd (not measured)")
    if Scenario.BARE in chosen:
        paced.append((await add("bare agent", bare(session)), partial(bare_latency, session)))
    for setup, scenario in ((ONE, Scenario.ONE), (THREE, Scenario.THREE)):
        if scenario in chosen:
            row = await add(setup.label, framework(session, setup))
            paced.append((row, partial(framework_latency, session, setup)))
    if Scenario.STORM in chosen:
        await add(
            "storm",
            storm(
                session,
                "storm",
                "storm, new group, no Redis",
                app_id=session.app_id("storm"),
                topic=session.config.topic,
                redis=False,
            ),
        )
    if Scenario.STORM_REDIS in chosen and session.redelivery_topic is not None:
        await add(THREE_REDIS.label, framework(session, THREE_REDIS, redis=True))
        await add(
            "storm, Redis cold",
            storm(
                session,
                "storm-redis-cold",
                "storm, new group, Redis",
                app_id=session.app_id("storm-redis-cold"),
                topic=session.config.topic,
                redis=True,
            ),
        )
        await add(
            "storm, Redis warm",
            storm(
                session,
                "storm-redis-warm",
                "storm, same group, Redis",
                app_id=session.app_id(THREE_REDIS.name),
                topic=session.redelivery_topic,
                redis=True,
            ),
        )
    if session.options.latency:
        for row, measure in paced:
            await add_latency(session, row, measure)
    if Scenario.RELAY in chosen:
        await add("relay", relay.throughput(session))
        if session.options.latency:
            await add("relay latency", relay.relay_latency(session))
            three = next(row for row in rows if row.name == THREE.name)
            rate = three.events_per_s * session.options.latency_load
            await add("outbox to commit", relay.end_to_end(session, rate))
    return rows


async def add_latency(
    session: Session, row: Row, measure: Callable[[float], Awaitable[Latency]]
) -> None:
    """Measure ``row``'s latency at a share of its throughput, into ``row``."""
    rate = row.events_per_s * session.options.latency_load
    with session.console.status(f"latency of {row.label} at {rate:,.0f} events/s"):
        latency = await measure(rate)
    row.p50_ms, row.p99_ms = latency.p50_ms, latency.p99_ms
    row.latency_rate, row.latency_events = latency.rate, latency.events
    if not latency.correct:
        row.correct = False
        row.detail += f"; latency run: {latency.detail}"
    mark = "[green]✔[/]" if latency.correct else "[bold red]✘[/]"
    session.console.print(
        f"{mark} {row.label} at {rate:,.0f} events/s: p50 {latency.p50_ms or 0:,.0f} ms, "
        f"p99 {latency.p99_ms or 0:,.0f} ms — {latency.detail}"
    )
