"""The Redis prefilter works over TLS (``rediss://`` with a CA), and a Redis it cannot trust
stops the worker at start in one line.

Contract: against a ``redis-server`` of the test's own that speaks only TLS, with a
certificate made for the run, a worker whose ``REDIS_URL`` is
``rediss://127.0.0.1:PORT/0?ssl_ca_certs=ca.pem`` remembers each applied event there
after its commit, and the same events sent again are found there (prefilter hits).
With a CA that did not sign the server's certificate the worker ends with exit code 2
and one line that names Redis, its address and the reason, before it joins the group:
no traceback, and nothing of the URL beyond host and port. (Redis that is down is
something else: the prefilter fails open, as ``test_prefilter_fails_open_when_redis_does``.)
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.demo.broker import free_port
from app.demo.certificates import CertificateAuthority
from app.demo.envelopes import encode
from tests.conftest import unavailable
from tests.integration.support.http import metric_families
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.workers import WorkerProcess, Workers

pytestmark = pytest.mark.integration

WITHIN = 30


class TlsRedis:
    """A ``redis-server`` listening only on a TLS port, its certificate from ``ca``."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.ca = CertificateAuthority(folder / "ca", "the test Redis's CA")
        self.server = self.ca.issue("redis", ("127.0.0.1", "localhost"))
        self.folder = folder
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                binary,
                *("--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1"),
                *("--tls-cert-file", str(self.server.cert), "--tls-key-file", str(self.server.key)),
                *("--tls-ca-cert-file", str(self.ca.cert), "--tls-auth-clients", "no"),
                *("--save", "", "--appendonly", "no", "--dir", str(folder)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def url(self, ca: Path | None = None) -> str:
        """``rediss://`` to this server, trusting ``ca`` (by default its own CA)."""
        return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={ca or self.ca.cert}"

    async def answers(self) -> bool:
        """Wait up to 5 s for a PING over TLS."""
        client = Redis.from_url(self.url(), socket_connect_timeout=0.5)
        try:
            for _ in range(50):
                try:
                    if await client.ping():
                        return True
                except (OSError, RedisError):
                    pass
                await asyncio.sleep(0.1)
        finally:
            await client.aclose()
        return False

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
async def tls_redis(tmp_path: Path) -> AsyncIterator[TlsRedis]:
    """A Redis of the test's own that speaks only TLS; killed afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("no redis-server binary on PATH")
    server = TlsRedis(binary, tmp_path / "redis")
    try:
        if not await server.answers():
            unavailable(
                f"redis-server did not answer over TLS on port {server.port} (built without TLS?)"
            )
        yield server
    finally:
        server.stop()


async def prefilter_total(worker: WorkerProcess, name: str) -> float:
    """``effectively_once_prefilter_<name>_total`` of one scrape."""
    wanted = f"effectively_once_prefilter_{name}_total"
    for family in await metric_families(worker):
        for sample in family.samples:
            if sample.name == wanted:
                return float(sample.value)
    raise AssertionError(f"no {wanted} on /metrics")


async def test_the_worker_remembers_and_finds_events_in_redis_over_tls(
    tls_redis: TlsRedis, topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    url = tls_redis.url()
    # A new connection's TLS handshake can outlast the default 50 ms budget of a call on
    # a busy machine (that call fails open); the test is about TLS, not speed.
    worker = workers.start(database_url, env={"REDIS_URL": url, "PREFILTER_TIMEOUT_SECONDS": "1"})
    orders = [Order(f"user-{n}", 1_000 + n) for n in range(5)]
    sent = [encode(e) for order in orders for e in (order.created(), order.paid())]
    await topic.send(sent)
    await topic.drained(workers=[worker])

    client = Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"eo:applied:{topic.stream.app_id}:*")]
    finally:
        await client.aclose()
    assert len(keys) >= len(sent), keys  # each event, for each consumer that took it
    assert await prefilter_total(worker, "remembered") >= len(sent)

    await topic.send(sent)  # the same events again: Redis knows them
    await topic.drained(workers=[worker])
    assert await prefilter_total(worker, "hits") >= len(sent)
    assert await prefilter_total(worker, "errors") == 0


async def test_a_redis_whose_certificate_it_cannot_trust_stops_the_worker_in_one_line(
    tls_redis: TlsRedis, topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    stranger = CertificateAuthority(tmp_path / "stranger", "a stranger's CA")
    worker = workers.start(database_url, env={"REDIS_URL": tls_redis.url(stranger.cert)})
    code = worker.exit_code(WITHIN)
    log = worker.log()
    assert code == 2, log
    assert "Traceback" not in log, log
    [line] = log.strip().splitlines()
    assert line.startswith("effectively-once: configuration error: cannot use Redis at "), line
    assert f"127.0.0.1:{tls_redis.port}" in line, line
    assert "certificate is not trusted" in line, line
    assert str(stranger.cert) not in line  # the URL is not quoted: it may hold a password
