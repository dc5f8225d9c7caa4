"""``python -m app demo``: the command-line face of ``app.demo.run``."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console

from app.demo.run import DemoOptions, run_demo

defaults = DemoOptions()


def register(cli: typer.Typer) -> None:
    """Add the ``demo`` command to ``cli``."""
    cli.command("demo")(demo)


def demo(
    orders: Annotated[int, typer.Option(min=1, help="Orders to generate.")] = defaults.orders,
    users: Annotated[int, typer.Option(min=1, help="Distinct users.")] = defaults.users,
    skus: Annotated[int, typer.Option(min=1, help="Distinct skus.")] = defaults.skus,
    seed: Annotated[int, typer.Option(help="Seed of the workload.")] = defaults.seed,
    duplicate_ratio: Annotated[
        float, typer.Option(min=0, max=1, help="Share of events sent twice.")
    ] = defaults.duplicate_ratio,
    swap_ratio: Annotated[
        float, typer.Option(min=0, max=1, help="Share of orders with two versions swapped.")
    ] = defaults.swap_ratio,
    cancel_ratio: Annotated[
        float, typer.Option(min=0, max=1, help="Share of orders cancelled.")
    ] = defaults.cancel_ratio,
    partitions: Annotated[
        int, typer.Option(min=1, help="Partitions of the order topic.")
    ] = defaults.partitions,
    timeout: Annotated[
        float, typer.Option(min=1, help="Give up after this many seconds in total.")
    ] = defaults.timeout,
    keep: Annotated[
        bool, typer.Option(help="Keep the temp directory (database, logs) afterwards.")
    ] = defaults.keep,
) -> None:
    """Run a broker, SQLite and a worker locally; send orders; check the consumers' tables."""
    options = DemoOptions(
        orders=orders,
        users=users,
        skus=skus,
        seed=seed,
        duplicate_ratio=duplicate_ratio,
        swap_ratio=swap_ratio,
        cancel_ratio=cancel_ratio,
        partitions=partitions,
        timeout=timeout,
        keep=keep,
    )
    # A SIGTERM unwinds like Ctrl-C, so the worker and the broker are stopped too.
    signal.signal(signal.SIGTERM, _interrupt)
    raise typer.Exit(run_demo(options, Console()))


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt
