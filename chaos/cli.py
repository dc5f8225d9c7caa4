"""``python -m chaos``: the command-line face of ``chaos.run``."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from app.demo.local import BROKER_KINDS
from chaos.profile import PROFILES, with_overrides
from chaos.run import DEFAULT_HOME, SOURCES, CannotRun, Options, run_soak

CAPTURED_WIDTH = 140


def main(
    profile: Annotated[str, typer.Option(help=f"The soak to run: {', '.join(PROFILES)}.")] = "full",
    database: Annotated[
        str, typer.Option(help="postgresql (own cluster on 5434) or mariadb (own server on 3307).")
    ] = "postgresql",
    events: Annotated[
        int | None, typer.Option(min=100, help="Records to send (the profile's by default).")
    ] = None,
    rate: Annotated[
        float | None, typer.Option(min=1, help="Records per second (the profile's by default).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the workload and the kills.")] = None,
    json_out: Annotated[
        Path | None, typer.Option(help="Also write the outcome as JSON to this file.")
    ] = None,
    broker: Annotated[
        str, typer.Option(help="kafka (Apache Kafka from Maven Central's jars) or tansu.")
    ] = "kafka",
    home: Annotated[
        Path, typer.Option(help="Where the soak keeps its servers' files between runs.")
    ] = DEFAULT_HOME,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the database and the logs afterwards.")
    ] = False,
    source: Annotated[
        str,
        typer.Option(
            help="direct (one producer straight to the topic) or outbox (an order service's "
            "outbox, two relays SIGKILLed on schedule)."
        ),
    ] = "direct",
) -> None:
    """Drive workers, database, Redis and broker through scheduled faults; check every effect."""
    if profile not in PROFILES:
        raise typer.BadParameter(f"one of {', '.join(PROFILES)}", param_hint="--profile")
    if database not in ("postgresql", "mariadb"):
        raise typer.BadParameter("postgresql or mariadb", param_hint="--database")
    if broker not in BROKER_KINDS:
        raise typer.BadParameter(" or ".join(BROKER_KINDS), param_hint="--broker")
    if source not in SOURCES:
        raise typer.BadParameter(" or ".join(SOURCES), param_hint="--source")
    chosen = with_overrides(PROFILES[profile], events=events, rate=rate, seed=seed)
    options = Options(chosen, database, home, json_out, keep, broker, source)
    console = Console() if sys.stdout.isatty() else Console(width=CAPTURED_WIDTH)
    if chosen.brokers > 1 and broker != "kafka":
        console.print(
            f"[bold red]✘[/] the {profile} profile runs {chosen.brokers} Apache Kafka nodes: "
            f"--broker kafka, not {broker}"
        )
        raise typer.Exit(2)
    try:
        code = asyncio.run(_interruptible(options, console))
    except CannotRun as exc:
        console.print(f"[bold red]✘ the soak cannot run here:[/] {exc}")
        code = 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("[yellow]interrupted; everything the soak started is stopped[/]")
        code = 130
    except ValueError as exc:  # a profile the workload cannot be shaped to
        console.print(f"[bold red]✘[/] {exc}")
        code = 2
    raise typer.Exit(code)


async def _interruptible(options: Options, console: Console) -> int:
    """``run_soak``, cancelled (so that it cleans up) on SIGTERM as on Ctrl-C."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await run_soak(options, console)
