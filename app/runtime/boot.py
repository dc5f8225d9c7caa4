"""How a worker starts: its web port before it waits for anything; a start that cannot
succeed ends the worker in one line.

faust starts an app's parts one after the other: sensors, producer, web server,
consumer, agents. A worker waits for its broker before the producer and the consumer
connect (``broker_wait``), and it waited before any part started, so ``/health`` and
``/ready`` did not answer while it waited: a liveness probe restarted a worker that was
only waiting for its broker. Here the web server starts first, then ``BrokerFirst``
waits for the broker and creates the consumed topics, then the rest starts as faust
orders it. Meanwhile ``/health`` answers 200 and ``/ready`` 503, naming the broker.

The services (schema, relay, connections) start with the first agent, on faust's loop.
A start that a mistake stops (a revision the database refuses, a migration history that
cannot be followed: ``ConfigurationError``) is no outage to wait for: ``refuse`` says it in
one line and stops the worker with exit code 2, as a mistake found before faust starts
(``app.runtime.entry``). Left to faust, each agent crashed on it in turn, with a
traceback each, and the worker exited 1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from faust.app.base import BootStrategy
from mode import Service

from app.errors import ConfigurationError
from app.kafka_clients import KafkaClients
from app.runtime.broker_wait import wait_for_broker

log = logging.getLogger("effectively_once.worker")
# mode's worker says this of the reason it exits with: not of a refused start.
_CRASH_LINE = "We experienced a crash!"
_STOPPING: set[asyncio.Future[None]] = set()  # held until done (the loop keeps weak ones)


class BrokerFirst(Service):
    """Waits for the broker (``clients``; ``None``: not waited for), then runs ``declare``
    (the consumed topics' creation; ``None``: none)."""

    def __init__(
        self,
        clients: KafkaClients | None,
        declare: Callable[[], Awaitable[None]] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._clients = clients
        self._declare = declare

    async def on_start(self) -> None:
        if self._clients is not None:
            await wait_for_broker(self._clients)
        if self._declare is not None:
            await self._declare()


class WebFirst(BootStrategy):
    """faust's order for a worker, with the web server and the wait for the broker first."""

    def server(self) -> Iterable[Any]:
        """Sensors, web server, the wait for the broker, then producer, consumer, agents,
        conductor and tables, as faust starts them."""
        app = self.app
        first = BrokerFirst(
            getattr(app, "broker_clients", None), getattr(app, "topics_first", None), loop=app.loop
        )
        return self._chain(
            self.sensors(),
            self.web_server(),
            [first],
            self.kafka_producer(),
            self.kafka_consumer(),
            self.agents(),
            self.kafka_conductor(),
            self.tables(),
        )


class StartRefused(SystemExit):
    """The worker's exit: code 2, as for any mistake found at start."""

    def __init__(self) -> None:
        super().__init__(2)


def refuse(app: Any, exc: ConfigurationError) -> None:
    """Log ``exc`` in one line and stop the worker of ``app`` with exit code 2 (once: a
    worker stopping so already says nothing more, e.g. a second client meeting the same
    refusal)."""
    root = app.beacon.root
    worker = root.data if root is not None else None
    if worker is not None and isinstance(getattr(worker, "crash_reason", None), StartRefused):
        return
    log.error("configuration error: %s", exc)
    if worker is None or not hasattr(worker, "crash_reason"):
        raise StartRefused  # no worker around the app: end here
    # mode's worker raises its crash reason once its loop is closed: the exit code.
    worker.crash_reason = StartRefused()
    worker.log.logger.addFilter(_quiet_crash_line)
    stopping = asyncio.ensure_future(worker.stop())
    _STOPPING.add(stopping)
    stopping.add_done_callback(_STOPPING.discard)


def _quiet_crash_line(record: logging.LogRecord) -> bool:
    return _CRASH_LINE not in str(record.msg)
