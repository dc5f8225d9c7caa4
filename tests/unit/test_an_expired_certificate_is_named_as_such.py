"""A server certificate out of date is named as such, never blamed on the CA file.

Contract (``app.certificate_words``): a broker, a Redis or a database whose TLS
certificate expired (issued by the very CA the client is given) is refused at start in
one line saying the certificate is out of date, to be renewed (or the host's clock set),
not that the CA setting must hold the CA that signed it: that sent operators to a file
that was right. A server's certificate that is in date and signed by another CA is still
"not trusted", naming the CA setting.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.broker_security import BrokerSecurity
from app.db.refusal import refusal as database_refusal
from app.demo.certificates import CertificateAuthority
from app.errors import BrokerRefused
from app.kafka_clients import KafkaClients
from app.prefilter.client import refusal as redis_refusal

OUT_OF_DATE = "its certificate is out of date"


@pytest.fixture
async def expired_server(tmp_path: Path) -> AsyncIterator[tuple[int, Path]]:
    """A TLS server on 127.0.0.1 whose certificate expired a day ago; its port and CA."""
    ca = CertificateAuthority(tmp_path / "ca")
    issued = ca.issue("server", ("127.0.0.1", "localhost"), expired=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.cert, issued.key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    async with server:
        yield server.sockets[0].getsockname()[1], ca.cert


async def test_the_broker_clients_name_an_expired_certificate(
    expired_server: tuple[int, Path],
) -> None:
    port, ca = expired_server
    clients = KafkaClients(
        f"kafka://127.0.0.1:{port}", BrokerSecurity(protocol="SSL", ca_file=str(ca))
    )
    with pytest.raises(BrokerRefused) as refused:
        await clients.connect(5.0)
    assert OUT_OF_DATE in str(refused.value), refused.value
    assert "BROKER_SSL_CA_FILE" not in str(refused.value)


async def test_the_prefilter_names_an_expired_certificate(
    expired_server: tuple[int, Path],
) -> None:
    port, ca = expired_server
    said = await redis_refusal(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}", 5.0)
    assert said is not None and OUT_OF_DATE in said, said


async def test_a_database_refusal_names_an_expired_certificate(
    expired_server: tuple[int, Path],
) -> None:
    port, ca = expired_server
    context = ssl.create_default_context(cafile=str(ca))
    with pytest.raises(ssl.SSLCertVerificationError) as met:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        writer.close()
    url = f"postgresql+asyncpg://app@127.0.0.1:{port}/orders?ssl=verify-full"
    said = database_refusal(met.value, url)
    assert said is not None and OUT_OF_DATE in said, said
    assert "sslrootcert" not in said
