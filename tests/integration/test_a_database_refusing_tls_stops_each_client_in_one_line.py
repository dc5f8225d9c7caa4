"""A database URL whose TLS cannot work stops the worker and the relay at start, in one line.

Contract: against a PostgreSQL and a MariaDB of the test's own that take TLS only, a
URL whose CA file does not hold the server's CA (``sslrootcert``, ``ssl_ca``), or that
names the PostgreSQL server by an address its certificate lacks (``verify-full`` to
127.0.0.1), makes the worker and ``python -m app relay`` exit with code 2 within the
connect timeout, with one line naming what failed and the parameter to look at, no
traceback, and never the URL's password. A mistake in the URL itself (an unknown
``sslmode``, a CA file that cannot be read) is a settings error, one line under
``invalid settings:``, before any connection. None waits or retries: waiting cannot
change a certificate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.db.timeouts import DEFAULT_TIMEOUTS
from app.demo.certificates import CertificateAuthority
from tests.integration.support.own_servers import free_port
from tests.integration.support.relays import Relays
from tests.integration.support.tls_mariadb import TlsMariaDB
from tests.integration.support.tls_postgres import TlsPostgres
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration

PASSWORD = "pw-never-shown"
# Python's start, the settings, one refused connection.
WITHIN = DEFAULT_TIMEOUTS.connect + 20
WORKER = "effectively-once: configuration error: "
RELAY = "effectively-once relay: "

Case = Callable[[pytest.FixtureRequest, CertificateAuthority], tuple[str, str]]


def _postgres(request: pytest.FixtureRequest) -> TlsPostgres:
    server: TlsPostgres = request.getfixturevalue("tls_postgres")
    return server


def _mariadb(request: pytest.FixtureRequest) -> TlsMariaDB:
    server: TlsMariaDB = request.getfixturevalue("tls_mariadb")
    return server


def untrusted_postgres(
    request: pytest.FixtureRequest, stranger: CertificateAuthority
) -> tuple[str, str]:
    server = _postgres(request)
    url = server.url("postgres", f"sslmode=verify-full&sslrootcert={stranger.cert}")
    says = (
        f"cannot connect to the database at localhost:{server.port}: its certificate is not "
        "trusted (unable to get local issuer certificate); check sslrootcert"
    )
    return url, says


def misnamed_postgres(request: pytest.FixtureRequest, _: CertificateAuthority) -> tuple[str, str]:
    server = _postgres(request)
    ca = request.getfixturevalue("database_ca").cert
    url = server.url("postgres", f"sslmode=verify-full&sslrootcert={ca}", host="127.0.0.1")
    says = (
        f"cannot connect to the database at 127.0.0.1:{server.port}: its certificate does not "
        "name the host (IP address mismatch, certificate is not valid for '127.0.0.1'); "
        "connect by a name the certificate holds, or use sslmode=verify-ca"
    )
    return url, says


def untrusted_mariadb(
    request: pytest.FixtureRequest, stranger: CertificateAuthority
) -> tuple[str, str]:
    server = _mariadb(request)
    url = server.url("mysql", f"ssl_ca={stranger.cert}")
    says = (
        f"cannot connect to the database at 127.0.0.1:{server.port}: its certificate is not "
        "trusted (self-signed certificate in certificate chain); check ssl_ca"
    )
    return url, says


def unknown_sslmode(_: pytest.FixtureRequest, __: CertificateAuthority) -> tuple[str, str]:
    url = "postgresql://postgres@db.example/orders?sslmode=verify"
    says = (
        "DATABASE_URL: Value error, sslmode must be one of disable, allow, prefer, require, "
        "verify-ca, verify-full, got 'verify'"
    )
    return url, says


def unreadable_ca(_: pytest.FixtureRequest, __: CertificateAuthority) -> tuple[str, str]:
    url = "mysql://root@db.example/orders?ssl_ca=/nowhere/ca.pem"
    says = (
        "DATABASE_URL: Value error, ssl_ca: cannot read /nowhere/ca.pem (No such file or directory)"
    )
    return url, says


CASES: dict[str, Case] = {
    "untrusted-ca-postgresql": untrusted_postgres,
    "hostname-mismatch-postgresql": misnamed_postgres,
    "untrusted-ca-mariadb": untrusted_mariadb,
    "unknown-sslmode": unknown_sslmode,
    "unreadable-ca-file": unreadable_ca,
}


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    """A CA that signed neither server's certificate."""
    return CertificateAuthority(tmp_path_factory.mktemp("stranger"), "a stranger's CA")


@pytest.fixture(params=list(CASES))
def refused(request: pytest.FixtureRequest, stranger: CertificateAuthority) -> tuple[str, str]:
    """(the URL, with a password; the line it must end with) of each case."""
    url, says = CASES[request.param](request, stranger)
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{PASSWORD}@{host}", says


@pytest.fixture
def stream() -> Stream:
    """A broker nobody listens on: each client stops before it would look for one."""
    port = free_port()
    return Stream(f"kafka://127.0.0.1:{port}", f"127.0.0.1:{port}", "orders", "eo-tls", 1)


def one_line(log: str, expected: str) -> None:
    """``log`` is ``expected`` alone: no traceback, no other line, no password."""
    assert "Traceback" not in log, log
    assert PASSWORD not in log, log
    assert log.strip().splitlines()[-1] == expected, log


def _expected(prefix: str, says: str) -> str:
    if says.startswith("DATABASE_URL"):
        return f"  {says}"  # under the "invalid settings:" line
    return prefix + says


async def test_the_worker_ends_with_one_line(refused: tuple[str, str], workers: Workers) -> None:
    url, says = refused
    worker = workers.start(url)
    code = worker.exit_code(WITHIN)
    log = worker.log()
    assert code == 2, log
    one_line(log, _expected(WORKER, says))
    expected_lines = 2 if says.startswith("DATABASE_URL") else 1
    assert len(log.strip().splitlines()) == expected_lines, log


async def test_the_relay_process_ends_with_one_line(
    refused: tuple[str, str], stream: Stream, tmp_path: Path
) -> None:
    url, says = refused
    code, log = Relays(tmp_path / "relays").run_to_exit(url, stream.broker_url, WITHIN)
    assert code == 2, log
    one_line(log, _expected(RELAY, says))
