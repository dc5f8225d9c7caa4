"""The standalone relay's ``/metrics`` and ``/ready`` port listens on ``RELAY_METRICS_BIND``.

Contract: by default on every address (``0.0.0.0``), as the worker's web port; with
``RELAY_METRICS_BIND=127.0.0.1`` on the loopback only, so that a host's other interfaces
do not serve it.
"""

from __future__ import annotations

import aiohttp

from app.outbox.relay_web import RelayPort
from app.settings import Settings


async def listening(host: str | None) -> list[str]:
    port = RelayPort()
    if host is None:
        await port.start(0)
    else:
        await port.start(0, host)
    try:
        assert port._runner is not None
        addresses = [address[0] for address in port._runner.addresses]
        number = port._runner.addresses[0][1]
        async with (
            aiohttp.ClientSession() as client,
            client.get(f"http://127.0.0.1:{number}/ready") as answer,
        ):
            assert answer.status == 503  # no relay behind it: "starting"
        return addresses
    finally:
        await port.stop()


async def test_every_address_by_default_and_the_loopback_when_told() -> None:
    assert Settings().relay_metrics_bind == "0.0.0.0"
    assert await listening(None) == ["0.0.0.0"]
    assert await listening("127.0.0.1") == ["127.0.0.1"]
