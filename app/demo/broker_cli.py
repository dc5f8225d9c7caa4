"""``python -m app broker``: a local broker for development, until Ctrl-C.

Apache Kafka (the default; Java 17 and Maven, its jars fetched once) or Tansu
(``--kind tansu``, from the ``demo`` extra). It prints the settings a worker and
a relay need to use it, and keeps nothing: its topics go when it stops.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
from typing import Annotated

import typer

from app.demo.local import BROKER_KINDS, local_broker


def register(cli: typer.Typer) -> None:
    """Add the ``broker`` command to ``cli``."""
    cli.command("broker")(broker)


def broker(
    kind: Annotated[
        str, typer.Option(help="kafka (Apache Kafka from Maven Central's jars) or tansu.")
    ] = "kafka",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on 127.0.0.1.")] = 9092,
) -> None:
    """Run a local broker for development; print the settings to use; stop on Ctrl-C."""
    if kind not in BROKER_KINDS:
        _fail(f"--kind: one of {', '.join(BROKER_KINDS)}")
    if _taken(port):
        _fail(f"port {port} is in use on 127.0.0.1 (another broker?); choose one with --port")
    local = local_broker(kind, port=port)
    try:
        local.start()
    except (RuntimeError, OSError) as exc:
        _fail(f"the {kind} broker did not start: {exc}")
    print(f"{kind} broker on {local.bootstrap}; Ctrl-C stops it (its topics go with it).")
    print("Use it with:")
    print(f"  export BROKER_URL={local.url}")
    if not local.idempotent:
        print("  export RELAY_IDEMPOTENT=false  # Tansu refuses idempotent producers")
    sys.stdout.flush()
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        local.stop()
        print("broker stopped")


def _taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _fail(message: str) -> None:
    print(f"effectively-once broker: {message}", file=sys.stderr)
    raise typer.Exit(2)
