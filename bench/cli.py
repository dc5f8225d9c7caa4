"""``python -m bench``: the command-line face of ``bench.run``."""

from __future__ import annotations

import asyncio
import signal
import sys
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console

from app.demo.local import BROKER_KINDS
from bench.options import BenchOptions, Scenario, smoke_options
from bench.run import run_bench

defaults = BenchOptions()
CAPTURED_WIDTH = 120
ALL_SCENARIOS = ",".join(s.value for s in Scenario)


def main(
    events_approx: Annotated[
        int, typer.Option(min=1, help="About this many records on the topic (sizes the orders).")
    ] = defaults.events_approx,
    orders: Annotated[
        int | None, typer.Option(min=1, help="Orders to generate (overrides --events-approx).")
    ] = None,
    batch_size: Annotated[
        int, typer.Option(min=1, help="BATCH_SIZE of every worker.")
    ] = defaults.batch_size,
    batch_wait: Annotated[
        float, typer.Option(min=0.001, help="BATCH_WAIT_SECONDS of every worker.")
    ] = defaults.batch_wait,
    partitions: Annotated[
        int, typer.Option(min=1, help="Partitions of the topic.")
    ] = defaults.partitions,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="A PostgreSQL database to use; its framework and example tables are EMPTIED "
            "between scenarios. Default: a fresh database on --postgres-server, dropped after."
        ),
    ] = None,
    postgres_server: Annotated[
        str, typer.Option(help="Where the fresh database is created.")
    ] = defaults.postgres_server,
    redis_url: Annotated[
        str, typer.Option(help="Redis for the storm-redis scenario.")
    ] = defaults.redis_url,
    json_out: Annotated[
        str, typer.Option(help="Where to write the results as JSON.")
    ] = defaults.json_out,
    scenarios: Annotated[
        str, typer.Option(help=f"Comma-separated, from {ALL_SCENARIOS}.")
    ] = ALL_SCENARIOS,
    skip_latency: Annotated[
        bool, typer.Option("--skip-latency", help="Leave out the paced latency runs.")
    ] = False,
    latency_seconds: Annotated[
        float, typer.Option(min=1, help="How long each latency run offers load.")
    ] = defaults.latency_seconds,
    broker: Annotated[
        str, typer.Option(help="kafka (Apache Kafka from Maven Central's jars) or tansu.")
    ] = defaults.broker,
    smoke: Annotated[
        bool,
        typer.Option("--smoke", help="A ~1.5k-event run that checks correctness, not speed."),
    ] = False,
) -> None:
    """Measure the framework's throughput, latency and cost against a bare faust agent."""
    try:
        chosen = Scenario.parse(scenarios)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scenarios") from None
    if broker not in BROKER_KINDS:
        raise typer.BadParameter(" or ".join(BROKER_KINDS), param_hint="--broker")
    options = BenchOptions(
        events_approx=events_approx,
        orders=orders,
        batch_size=batch_size,
        batch_wait=batch_wait,
        partitions=partitions,
        database_url=database_url,
        postgres_server=postgres_server,
        redis_url=redis_url,
        json_out=json_out,
        scenarios=chosen,
        latency=not skip_latency,
        latency_seconds=latency_seconds,
        broker=broker,
    )
    if smoke:
        options = smoke_options(options)
    # A SIGTERM unwinds like Ctrl-C, so workers, broker and database are cleaned up too.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = asyncio.run(run_bench(options, _console()))
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


def _console() -> Console:
    """A terminal's width; 120 columns when writing to a file or pipe, so the table fits."""
    return Console() if sys.stdout.isatty() else Console(width=CAPTURED_WIDTH)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt
