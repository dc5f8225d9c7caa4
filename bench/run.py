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
from app.demo.produce import ensure_topic, produce
from bench.database import BenchDatabase, DatabaseError
from bench.latency import Latency, bare_latency, framework_latency
from bench.options import BenchOptions, Scenario
from bench.results import Row, with_ratios, write_json
from bench.scenarios import ONE, THREE, bare, framework, storm
from bench.session import BenchError, Session
from bench.table import print_table
from bench.worker import WorkerConfig
from bench.workload import describe, make_workload

EXPECTED_FAILURES = (BenchError, DatabaseError, KafkaError, SQLAlchemyError, OSError, RuntimeError)


async def run_bench(options: BenchOptions, console: Console) -> int:
    """Run the benchmark, print and write its results; 0 only if every scenario was correct."""
    workdir = Path(tempfile.mkdtemp(prefix="eo-bench-"))
    broker = LocalBroker(log_path=workdir / "broker.log")
    database: BenchDatabase | None = None
    keep = True
    try:
        if Scenario.STORM_REDIS in options.scenarios:
            await require_redis(options.redis_url)
        with console.status("generating the workload"):
            workload = make_workload(options.order_count)
        if options.database_url is None:
            database = await BenchDatabase.create(options.postgres_server)
        else:
            database = BenchDatabase.existing(options.database_url)
        await database.migrate()
        broker.start()
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
            ),
            workdir=workdir,
            tag=tag,
            console=console,
        )
        await ensure_topic(broker.bootstrap, session.config.topic, options.partitions)
        started = time.monotonic()
        await produce(broker.bootstrap, session.config.topic, workload.messages)
        console.print(
            f"produced {session.messages:,} events ({workload.distinct_events:,} distinct) "
            f"onto {options.partitions} partitions in {time.monotonic() - started:.1f} s; "
            f"database {database.name}, logs in {workdir}"
        )
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
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)

    title = "effectively-once throughput" + (
        " (SMOKE: a tiny workload, checks correctness; the figures mean nothing)"
        if options.smoke
        else ""
    )
    print_table(console, rows, title)
    settings = {
        "batch_size": options.batch_size,
        "batch_wait_seconds": options.batch_wait,
        "partitions": options.partitions,
        "latency_offered_share": options.latency_load if options.latency else None,
        "latency_seconds": options.latency_seconds if options.latency else None,
    }
    out = Path(options.json_out)
    write_json(out, rows, describe(workload), settings, options.smoke)
    console.print(f"results written to {out}")
    if keep:
        console.print(f"[bold red]✘ a result is wrong[/]; logs kept in {workdir}")
        return 1
    return 0


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
    if Scenario.BARE in chosen:
        paced.append((await add("bare agent", bare(session)), partial(bare_latency, session)))
    for setup, scenario in ((ONE, Scenario.ONE), (THREE, Scenario.THREE)):
        if scenario in chosen:
            row = await add(setup.label, framework(session, setup))
            paced.append((row, partial(framework_latency, session, setup)))
    if Scenario.STORM in chosen:
        await add("storm", storm(session, "storm", "storm, no Redis"))
    if Scenario.STORM_REDIS in chosen:
        redis = session.options.redis_url
        await add(
            "storm, Redis", storm(session, "storm-redis-fill", "storm, Redis 1st pass", redis)
        )
        await add("storm, Redis", storm(session, "storm-redis-warm", "storm, Redis warm", redis))
    if session.options.latency:
        for row, measure in paced:
            await add_latency(session, row, measure)
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
    session.console.print(
        f"{'[green]✔[/]' if latency.correct else '[bold red]✘[/]'} {row.label} at "
        f"{rate:,.0f} events/s: p50 {latency.p50_ms:,.0f} ms, p99 {latency.p99_ms:,.0f} ms"
    )


async def require_redis(url: str) -> None:
    """Fail now, not after minutes of measuring, if the storm's Redis does not answer."""
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    client = Redis.from_url(url, socket_connect_timeout=3)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise BenchError(
            f"Redis at {url} does not answer ({exc!r}); start it, pass --redis-url, "
            "or leave storm-redis out of --scenarios"
        ) from exc
    finally:
        await client.aclose()
