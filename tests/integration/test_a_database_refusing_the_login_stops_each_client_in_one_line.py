"""A database that refuses the URL's login stops the worker and the relay at start, in one line.

Contract: with a wrong password in ``DATABASE_URL`` (a role of the test's own, which
logs in by password: ``scram-sha-256`` on a PostgreSQL of the test's own over TLS, and
on MariaDB, the server CI starts), the worker and ``python -m app relay`` exit with
code 2 within the connect timeout, with one line naming the database, the server's
own reason and what to check, no traceback, and never the password. Waiting cannot
change a password. Once running, the same refusal is an outage (the worker pauses:
``tests/unit/test_infrastructure_failures_are_told_apart.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from app.db.timeouts import DEFAULT_TIMEOUTS
from tests.conftest import unavailable
from tests.integration.support.databases import (
    MARIADB_SERVER,
    ServiceUnavailable,
    mariadb_execute,
)
from tests.integration.support.own_servers import free_port
from tests.integration.support.relays import Relays
from tests.integration.support.tls_postgres import TlsPostgres
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration

ROLE = "eo_login_probe"
RIGHT = "the-right-one"
WRONG = "pw-never-shown"
WITHIN = DEFAULT_TIMEOUTS.connect + 20  # Python's start, the settings, one refused login
REFUSED = "; check the user and password of DATABASE_URL"


async def _postgres(request: pytest.FixtureRequest) -> tuple[str, str]:
    server: TlsPostgres = request.getfixturevalue("tls_postgres")
    ca = request.getfixturevalue("database_ca").cert
    await server.execute(f"DROP ROLE IF EXISTS {ROLE}")
    await server.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{RIGHT}'")
    url = server.url("postgres", f"sslmode=verify-full&sslrootcert={ca}")
    url = url.replace("postgres@", f"{ROLE}:{WRONG}@", 1)
    says = (
        f"cannot connect to the database at localhost:{server.port}: it refused the login "
        f'(password authentication failed for user "{ROLE}")' + REFUSED
    )
    return url, says


async def _mariadb_run(statement: str) -> None:
    try:
        await mariadb_execute(statement)
    except ServiceUnavailable as exc:
        unavailable(str(exc))


async def _mariadb(_: pytest.FixtureRequest) -> tuple[str, str]:
    server = make_url(MARIADB_SERVER)
    await _mariadb_run(f"DROP USER IF EXISTS '{ROLE}'@'%'")
    await _mariadb_run(f"CREATE USER '{ROLE}'@'%' IDENTIFIED BY '{RIGHT}'")
    port = server.port or 3306
    url = f"mysql://{ROLE}:{WRONG}@{server.host}:{port}/mysql"
    says = (
        f"cannot connect to the database at {server.host}:{port}: it refused the login "
        f"(Access denied for user '{ROLE}'@"
    )
    return url, says


@pytest.fixture(params=["postgresql", "mariadb"])
async def refused(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, str]]:
    """(a URL with a wrong password, the start of the line it must end with)."""
    if request.param == "postgresql":
        yield await _postgres(request)
    else:
        yield await _mariadb(request)
        await _mariadb_run(f"DROP USER IF EXISTS '{ROLE}'@'%'")


@pytest.fixture
def stream() -> Stream:
    """A broker nobody listens on: each client stops before it would look for one."""
    port = free_port()
    return Stream(f"kafka://127.0.0.1:{port}", f"127.0.0.1:{port}", "orders", "eo-login", 1)


def one_line(log: str, prefix: str, says: str) -> None:
    """``log`` is one line, ``prefix`` + ``says`` ...: no traceback, no password."""
    assert "Traceback" not in log, log
    assert WRONG not in log, log
    lines = log.strip().splitlines()
    assert len(lines) == 1, log
    assert lines[0].startswith(prefix + says), log
    assert lines[0].endswith(REFUSED), log


async def test_the_worker_ends_with_one_line(refused: tuple[str, str], workers: Workers) -> None:
    url, says = refused
    worker = workers.start(url)
    code = worker.exit_code(WITHIN)
    assert code == 2, worker.log()
    one_line(worker.log(), "effectively-once: configuration error: ", says)


async def test_the_relay_process_ends_with_one_line(
    refused: tuple[str, str], stream: Stream, tmp_path: Path
) -> None:
    url, says = refused
    code, log = Relays(tmp_path / "relays").run_to_exit(url, stream.broker_url, WITHIN)
    assert code == 2, log
    one_line(log, "effectively-once relay: ", says)
