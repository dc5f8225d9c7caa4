"""``/ready``'s broker check keeps one connection, and notices it go silent within its bound.

Contract: ``BrokerCheck`` connects once (TLS and login, as the worker's clients) and
asks the broker for metadata over that connection at every later check, so a probe
every few seconds costs no handshake (and no "Authenticated" log line). When the
connection goes silent the check fails within its time limit, naming the broker, and
the next check connects anew; once the broker answers again it passes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.errors import BrokerUnreachable
from app.kafka_clients import BrokerCheck, KafkaClients
from chaos.proxy import TcpProxy
from tests.integration.support.session_broker import SharedBroker

pytestmark = pytest.mark.integration

WITHIN = 1.0


@pytest.fixture
def proxy(broker: SharedBroker) -> Iterator[TcpProxy]:
    """A proxy in front of the run's broker (one connection is all the check makes)."""
    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
    front = TcpProxy(host, int(port)).start()
    yield front
    front.stop()


async def test_one_connection_serves_every_check_until_it_goes_silent(proxy: TcpProxy) -> None:
    check = BrokerCheck(KafkaClients(f"kafka://{proxy.address}"))
    try:
        for _ in range(5):
            assert await check.check(WITHIN) == proxy.address
        assert proxy.open_connections == 1

        proxy.blackhole()
        started = time.monotonic()
        with pytest.raises(BrokerUnreachable, match=f"{proxy.address}: no answer within 1 s"):
            await check.check(WITHIN)
        assert time.monotonic() - started < WITHIN + 0.5

        proxy.reset()
        proxy.heal()
        assert await check.check(WITHIN) == proxy.address
    finally:
        check.close()
