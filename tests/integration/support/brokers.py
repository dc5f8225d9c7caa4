"""A broker of the test's own behind a TCP proxy, for tests that cut the workers off from it.

The broker advertises the proxy's address, so every connection a client makes
(not only the first) goes through the proxy. ``cut_off`` blackholes it: what the
clients send is held, unacknowledged; ``restore`` resets every connection (what
was held is dropped, as if it never left the client) and forwards again;
``deliver_held`` forwards again without resetting (what was held arrives late, as
after a network partition healed: the broker takes records whose sender is gone).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from app.demo.broker import LocalBroker, free_port
from app.demo.kafka import KafkaCluster
from app.demo.local import local_broker
from chaos.proxy import TcpProxy
from tests.conftest import unavailable
from tests.integration.support.session_broker import broker_kind
from tests.integration.support.workers import Stream

PARTITIONS = 4


@dataclass
class OwnBroker:
    """A running broker, the proxy in front of it and a stream on it."""

    broker: LocalBroker | KafkaCluster
    proxy: TcpProxy
    stream: Stream

    def cut_off(self) -> None:
        """Nothing sent through the proxy reaches the broker, nor is answered."""
        self.proxy.blackhole()

    def take_down(self) -> None:
        """The broker is gone: connections reset, new ones refused (until ``restore``)."""
        self.proxy.refuse()
        self.proxy.reset()

    def deliver_held(self) -> None:
        """Forward again, what was held first."""
        self.proxy.heal()

    def restore(self) -> None:
        """Drop what was held (every connection reset), then forward again."""
        self.proxy.reset()
        self.proxy.heal()


@asynccontextmanager
async def own_broker(log_dir: Path, kind: str | None = None) -> AsyncIterator[OwnBroker]:
    """Start a broker (of ``kind``, by default the run's) and its proxy for this test only;
    both stopped at the end."""
    front = free_port()
    kind = kind or broker_kind()
    broker = local_broker(kind, log_path=log_dir / "own-broker.log", advertised_port=front)
    try:
        broker.start()
    except (RuntimeError, OSError) as exc:
        unavailable(f"the {kind} broker did not start: {exc}")
    proxy = TcpProxy("127.0.0.1", broker.port, listen_port=front).start()
    tag = uuid.uuid4().hex[:10]
    bootstrap = proxy.address
    stream = Stream(
        broker_url=f"kafka://{bootstrap}",
        bootstrap=bootstrap,
        topic=f"orders-{tag}",
        app_id=f"eo-test-{tag}",
        partitions=PARTITIONS,
    )
    try:
        yield OwnBroker(broker, proxy, stream)
    finally:
        proxy.stop()
        broker.stop()
