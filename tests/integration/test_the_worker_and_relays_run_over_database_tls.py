"""The worker and the relays run over a TLS database connection with the URL alone.

Contract: against a PostgreSQL that takes TLS connections only, named by the host its
certificate holds with ``sslmode=verify-full&sslrootcert=<the CA>``, and a MariaDB that
takes TLS only, with ``ssl_ca=<the CA>&ssl_verify_identity=true``:

- the migrations run and a connection is encrypted (the server says so);
- ``sslmode=require`` with no CA connects too, encrypted (nothing checked);
- a worker applies a small workload exactly (a duplicate included) and its in-worker
  relay ships the dead letter of a poison record;
- ``python -m app relay`` ships the rows an order service wrote to the outbox, each once.

The servers refuse any connection without TLS, so nothing here can have gone in plaintext.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import text

from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.db.urls import normalise_database_url
from app.demo.certificates import CertificateAuthority
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.small_run import relay_ships_the_outbox, worker_applies_a_few_orders
from tests.integration.support.state import Database
from tests.integration.support.tls_mariadb import TlsMariaDB
from tests.integration.support.tls_postgres import TlsPostgres
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration
# What the server says of the connection it serves: encrypted or not.
ENCRYPTED = {
    "postgresql": "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    "mysql": "SELECT IF(VARIABLE_VALUE <> '', 'true', 'false') FROM "
    "information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'",
}


@pytest.fixture(params=["postgresql", "mariadb"])
async def tls_url(request: pytest.FixtureRequest, database_ca: CertificateAuthority) -> str:
    """A fresh database on the TLS server, named with the URL parameters that verify it."""
    name = f"eo_tls_{uuid4().hex[:10]}"
    if request.param == "postgresql":
        pg: TlsPostgres = request.getfixturevalue("tls_postgres")
        await pg.create_database(name)
        return pg.url(name, f"sslmode=verify-full&sslrootcert={database_ca.cert}")
    maria: TlsMariaDB = request.getfixturevalue("tls_mariadb")
    await maria.create_database(name)
    return maria.url(name, f"ssl_ca={database_ca.cert}&ssl_verify_identity=true")


@pytest.fixture
async def tls_db(tls_url: str) -> AsyncIterator[Database]:
    """Reads back the TLS database."""
    database = Database(normalise_database_url(tls_url))
    yield database
    await database.dispose()


async def encrypted(url: str) -> str:
    """What the server says of a new connection on ``url``: ``true`` when encrypted."""
    url = normalise_database_url(url)
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return str(await conn.scalar(text(ENCRYPTED[engine.dialect.name])))
    finally:
        await engine.dispose()


async def test_the_migrations_run_over_tls_and_require_needs_no_ca(
    tls_url: str, tls_postgres: TlsPostgres
) -> None:
    await upgrade_to_head(normalise_database_url(tls_url))
    assert await encrypted(tls_url) == "true"
    bare = tls_postgres.url("postgres", "sslmode=require", host="127.0.0.1")
    assert await encrypted(bare) == "true"


async def test_worker_and_relay_work_over_tls(
    tls_url: str,
    stream: Stream,
    topic: OrderTopic,
    workers: Workers,
    tls_db: Database,
    tmp_path: Path,
) -> None:
    worker = workers.start(tls_url)
    await worker_applies_a_few_orders(worker, stream, topic, tls_db)
    assert worker.stop() == 0
    await relay_ships_the_outbox(
        stream, normalise_database_url(tls_url), tmp_path, relay_url=tls_url
    )
