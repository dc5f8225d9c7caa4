"""``python -m app relay``: ship ``DATABASE_URL``'s outbox to ``BROKER_URL`` until SIGTERM.

Several may run at once, against one database, in any number of processes. On
SIGTERM (or Ctrl-C) the relay finishes the rows in hand (``RELAY_STOP_GRACE_SECONDS``),
hands back the rows it never sent, marks the rest as the producer's close leaves
them, and exits 0. Prometheus metrics (``/metrics``) and readiness (``/ready``,
``app.outbox.relay_web``) are served on ``RELAY_METRICS_PORT`` (``0``: neither). A
setting it cannot use (an invalid value, a busy metrics port, a broker that refuses an
idempotent producer, a database that refuses the TLS its URL asks for) is one line on
stderr and exit code 2; an unreachable database or broker is waited for, one log line
per attempt (``/ready``'s ``database`` or ``broker`` check says so at once).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import NoReturn

import typer
from pydantic import ValidationError

from app.db.refusal import check_database
from app.errors import ConfigurationError, DatabaseRefused
from app.logging_setup import configure_process_logging
from app.settings import Settings, describe


def register(cli: typer.Typer) -> None:
    """Add the ``relay`` command to ``cli``."""
    cli.command("relay")(relay)


def relay() -> None:
    """Publish the outbox's rows to the broker, in aggregate order, until stopped."""
    try:
        settings = Settings()
    except ValidationError as exc:
        _fail("invalid settings:\n" + "\n".join(f"  {line}" for line in describe(exc)))
    try:
        asyncio.run(check_database(settings.database_url, settings.db_timeouts))
    except DatabaseRefused as exc:
        _fail(str(exc))
    configure_process_logging(settings)
    try:
        code = asyncio.run(_run(settings))
    except ConfigurationError as exc:  # a setting the relay's clients cannot use
        _fail(str(exc))
    raise typer.Exit(code)


async def _run(settings: Settings) -> int:
    from app.kafka_clients import BrokerCheck, KafkaClients
    from app.monitoring import readiness
    from app.monitoring.check_engine import CheckEngine
    from app.outbox.relay_web import RelayPort
    from app.outbox.runner import RelayRunner

    port = RelayPort()
    if settings.relay_metrics_port:
        try:
            await port.start(settings.relay_metrics_port, settings.relay_metrics_bind)
        except OSError as exc:
            _fail(
                f"cannot serve metrics on port {settings.relay_metrics_port} of "
                f"{settings.relay_metrics_bind} ({exc.strerror or exc}); set RELAY_METRICS_PORT "
                "to a free port (0 for none) and RELAY_METRICS_BIND to an address of this host"
            )
    runner = RelayRunner(settings)
    port.health = runner.health
    database = CheckEngine(settings.database_url, settings.db_timeouts)
    broker = BrokerCheck(KafkaClients.from_settings(settings))

    async def needs() -> list[readiness.Check]:
        return list(
            await asyncio.gather(readiness.database(database.engine), readiness.broker(broker))
        )

    port.also = needs
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, runner.relay.stop)
    try:
        runner.start()
        await runner.wait()
        await runner.stop()
    finally:
        await port.stop()
        broker.close()
        await database.dispose()
    return 2 if runner.failure is not None else 0


def _fail(message: str) -> NoReturn:
    print(f"effectively-once relay: {message}", file=sys.stderr)
    raise SystemExit(2)
