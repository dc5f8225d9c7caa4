"""A broker that refuses the connection settings stops each client at start, in one line.

Contract: with a wrong password (SCRAM-SHA-512 on SASL_SSL, PLAIN on SASL_PLAINTEXT), a
CA file that does not hold the broker's CA, a broker reached by an address its
certificate does not name, a client certificate from a CA the broker does not trust, or
TLS without the SASL login its listener asks for (it waited for ever, ``/ready`` calling
the broker fine), or a SASL login asked of a listener without SASL (it waited for ever),
``python -m app relay``, ``python -m dlq list`` and the worker each end within their
connect timeout with exit code 2 and one line that names what failed (the login, the
certificate's trust or name, the client certificate), no traceback, no password. None
waits, and none tries again without TLS or login: the settings name one protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db.migrate import upgrade_to_head
from app.demo.certificates import CertificateAuthority
from app.demo.secure_kafka import SASL_PLAINTEXT, SASL_SSL, SSL, SecureKafka
from app.kafka_clients import CONNECT_TIMEOUT_SECONDS
from app.outbox.broker import START_TIMEOUT_SECONDS
from chaos.proxy import TcpProxy
from tests.integration.support.dlq import DlqCommand
from tests.integration.support.relays import Relays
from tests.integration.support.secured import secured_stream
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration

WRONG = "not-the-password"
# What each refusal's line says; the reason comes from the broker or from OpenSSL.
SAYS = {
    "wrong-scram-password": "login of alice refused (SCRAM-SHA-512): Authentication failed",
    "wrong-plain-password": "login of bob refused (PLAIN): Authentication failed",
    "untrusted-ca": "its certificate is not trusted (unable to get local issuer certificate)",
    "hostname-mismatch": "its certificate does not name 127.0.0.2",
    "untrusted-client-certificate": "client certificate refused",
    # TLS alone on a listener that asks for a SASL login: it closes at the first request.
    "ssl-on-a-sasl-listener": "it closed the connection at the first request, twice, as a "
    "listener that asks for a SASL login does",
    # A SASL login asked of a listener without SASL: the broker answers IllegalSaslState.
    "sasl-on-a-plaintext-listener": "this listener takes no SASL login (SASL_PLAINTEXT asked "
    "for one)",
}
# Python's start, the settings, one refused connection: well inside the timeouts.
WITHIN = max(CONNECT_TIMEOUT_SECONDS, START_TIMEOUT_SECONDS) + 5


@pytest.fixture(scope="module")
def strangers(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    """A CA the broker has never heard of, and a client certificate it signed."""
    return CertificateAuthority(tmp_path_factory.mktemp("strangers"), "a stranger's CA")


@pytest.fixture(scope="module")
def misnamed(secure_kafka: SecureKafka) -> Iterator[TcpProxy]:
    """127.0.0.2 forwarding to the SASL_SSL listener: an address its certificate lacks."""
    port = int(secure_kafka.settings(SASL_SSL)["BROKER_URL"].rsplit(":", 1)[1])
    proxy = TcpProxy("127.0.0.1", port, listen_host="127.0.0.2").start()
    yield proxy
    proxy.stop()


@pytest.fixture(params=list(SAYS))
def refusal(
    request: pytest.FixtureRequest,
    secure_kafka: SecureKafka,
    strangers: CertificateAuthority,
    misnamed: TcpProxy,
) -> tuple[str, dict[str, str]]:
    """A failure's name and the settings that meet it."""
    name = str(request.param)
    if name == "wrong-scram-password":
        return name, {**secure_kafka.settings(SASL_SSL), "BROKER_SASL_PASSWORD": WRONG}
    if name == "wrong-plain-password":
        return name, {**secure_kafka.settings(SASL_PLAINTEXT), "BROKER_SASL_PASSWORD": WRONG}
    if name == "untrusted-ca":
        return name, {**secure_kafka.settings(SASL_SSL), "BROKER_SSL_CA_FILE": str(strangers.cert)}
    if name == "ssl-on-a-sasl-listener":
        tls = {k: v for k, v in secure_kafka.settings(SASL_SSL).items() if "_SASL_" not in k}
        return name, {**tls, "BROKER_SECURITY_PROTOCOL": "SSL"}
    if name == "sasl-on-a-plaintext-listener":
        return name, {**secure_kafka.settings(SASL_PLAINTEXT), "BROKER_URL": secure_kafka.url}
    if name == "hostname-mismatch":
        return name, {
            **secure_kafka.settings(SASL_SSL),
            "BROKER_URL": f"kafka://{misnamed.address}",
        }
    client = strangers.issue("stranger", client=True)
    return name, {
        **secure_kafka.settings(SSL),
        "BROKER_SSL_CERT_FILE": str(client.cert),
        "BROKER_SSL_KEY_FILE": str(client.key),
        "BROKER_SSL_KEY_PASSWORD": "",
    }


@pytest.fixture
def stream(secure_kafka: SecureKafka) -> Stream:
    """The ``workers`` fixture's topic and group, on the secured broker."""
    return secured_stream(secure_kafka, SASL_SSL)


def one_line(text: str, says: str, settings: dict[str, str]) -> str:
    """The one line of ``text`` that says ``says``; asserts it is the only such, and that
    nothing else went wrong in words an operator would have to read."""
    assert "Traceback" not in text, text
    for secret in (settings.get("BROKER_SASL_PASSWORD"), settings.get("BROKER_SSL_KEY_PASSWORD")):
        assert not secret or secret not in text, text
    [line] = [line for line in text.splitlines() if says in line]
    return line


async def test_the_relay_process_ends_with_one_line(
    refusal: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    name, settings = refusal
    database = f"sqlite+aiosqlite:///{tmp_path / 'outbox.db'}"
    await upgrade_to_head(database)
    code, log = Relays(tmp_path / "relays").run_to_exit(
        database, settings["BROKER_URL"], WITHIN, env=settings
    )
    assert code == 2, log
    line = one_line(log, SAYS[name], settings)
    assert "the relay cannot run: cannot connect to the broker at" in line, line
    assert [x for x in log.splitlines() if "ERROR" in x] == [line], log


async def test_the_dlq_command_ends_with_one_line(
    refusal: tuple[str, dict[str, str]], stream: Stream, tmp_path: Path
) -> None:
    name, settings = refusal
    dlq = DlqCommand(stream, f"sqlite+aiosqlite:///{tmp_path / 'none.db'}")
    ran = await dlq("list", env=settings)
    assert ran.code == 2, ran
    assert ran.err.count("\n") == 1, ran.err
    line = one_line(ran.err + ran.out, SAYS[name], settings)
    assert line.startswith("error: cannot connect to the broker at "), line


async def test_the_worker_ends_with_one_line(
    refusal: tuple[str, dict[str, str]], workers: Workers, tmp_path: Path
) -> None:
    name, settings = refusal
    worker = workers.start(f"sqlite+aiosqlite:///{tmp_path / 'worker.db'}", env=settings)
    code = worker.exit_code(WITHIN)
    log = worker.log()
    assert code == 2, log
    line = one_line(log, SAYS[name], settings)
    assert line.startswith("effectively-once: configuration error: cannot connect to the"), line
    assert len(log.strip().splitlines()) == 1, log
