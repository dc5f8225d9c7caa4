"""Fixtures for tests that run real workers against the real broker and databases.

- ``broker``: one broker for the whole run, shared by the xdist processes: Apache
  Kafka, or Tansu under ``TEST_BROKER=tansu`` (``support.session_broker``).
- ``secure_kafka``: an Apache Kafka of the test process's own with SASL_SSL
  (SCRAM-SHA-512), SSL (client certificates) and SASL_PLAINTEXT (PLAIN) listeners and
  the certificates and users they take (``app.demo.secure_kafka``), started on first use.
- ``tls_postgres``, ``tls_mariadb``: a PostgreSQL cluster and a MariaDB of the test
  process's own that take TLS connections only, their certificates from ``database_ca``
  (``support.tls_postgres``, ``support.tls_mariadb``); ``pgbouncer``: a PgBouncer of its
  own in transaction mode before the shared PostgreSQL (``support.pgbouncer``). Each is
  started on first use, on a free port.
- ``acl_kafka``: an Apache Kafka of the test process's own that enforces ACLs
  (``StandardAuthorizer``, nothing allowed without one) for SASL_PLAINTEXT users
  (``app.demo.acl_kafka``), started on first use.
- ``stream``: the test's own topic and consumer group on it, so tests never
  share broker state.
- ``backend`` / ``database_url``: a fresh database per test, dropped afterwards;
  PostgreSQL unless the test parametrises ``backend`` over ``BACKENDS``.
- ``make_database``: more databases in one test.
- ``topic``: produce records and wait until the group has committed them all.
- ``workers``: start ``python -m faust -A app worker`` processes; whatever is
  still running at the end is killed. Their logs live under ``tmp_path``, and
  the tail of each is attached to the report of a failing test.
- ``db``: read what the workers wrote into ``database_url``.
- ``migrated_database``: ``database_url`` with the framework's schema, for tests that
  write to it (the outbox) before any worker runs.
- ``engine``: ``database_url`` with the framework's tables and the pipeline tests'
  ``effect`` table, for tests that run the batch processor itself on a real database.

A missing service skips the test locally and fails it under ``CI=true``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.demo.acl_kafka import AclKafka
from app.demo.broker import LocalBroker
from app.demo.certificates import CertificateAuthority
from app.demo.secure_kafka import SecureKafka
from chaos.proxy import TcpProxy
from tests.conftest import unavailable
from tests.integration.support.databases import Databases, ServiceUnavailable
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.own_servers import ServerHome
from tests.integration.support.pgbouncer import PgBouncer
from tests.integration.support.proxies import database_proxy
from tests.integration.support.session_broker import SharedBroker, run_root, shared_broker
from tests.integration.support.state import Database
from tests.integration.support.tls_mariadb import TlsMariaDB
from tests.integration.support.tls_postgres import TlsPostgres
from tests.integration.support.workers import Stream, Workers
from tests.pipeline.support import test_metadata

PARTITIONS = 4
REDIS_URL = "redis://127.0.0.1:6379/0"

_WORKERS = pytest.StashKey[Workers]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Attach each worker's log tail to the report of a test that failed."""
    report = yield
    workers = item.stash.get(_WORKERS, None)
    if workers is not None and report.failed and call.when in ("setup", "call"):
        for worker in workers.started:
            report.sections.append(
                (f"worker {worker.name} log, last 80 lines ({worker.log_path})", worker.tail(80))
            )
    return report


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> SharedBroker:
    """The run's broker (started by the first process that asks for it)."""
    try:
        return shared_broker(run_root(tmp_path_factory.getbasetemp()))
    except Exception as exc:  # no Java, no Maven, no Tansu binary, or it did not start
        unavailable(f"the test broker did not start: {exc}")


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """Apache Kafka with the three secured listeners (whatever ``TEST_BROKER`` says: Tansu
    has no TLS or SASL listeners)."""
    folder = tmp_path_factory.mktemp("secure-kafka")
    try:
        secured = SecureKafka(folder=folder, log_path=folder / "kafka.log").start()
    except Exception as exc:  # no Java, no Maven, or it did not start
        unavailable(f"the secured Apache Kafka did not start: {exc}")
    yield secured
    secured.stop()


@pytest.fixture(scope="session")
def database_ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    """The CA that signs the TLS databases' certificates."""
    return CertificateAuthority(tmp_path_factory.mktemp("database-ca"), "database test CA")


@pytest.fixture(scope="session")
def tls_postgres(
    tmp_path_factory: pytest.TempPathFactory, database_ca: CertificateAuthority
) -> Iterator[TlsPostgres]:
    """A PostgreSQL cluster that takes TLS connections only."""
    home = tmp_path_factory.mktemp("tls-postgres")
    try:
        server = TlsPostgres(ServerHome.make(home, "postgres"), database_ca).start()
    except Exception as exc:  # no PostgreSQL binaries, or it did not start
        unavailable(f"the TLS PostgreSQL did not start: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tls_mariadb(
    tmp_path_factory: pytest.TempPathFactory, database_ca: CertificateAuthority
) -> Iterator[TlsMariaDB]:
    """A MariaDB that takes TLS connections only."""
    home = tmp_path_factory.mktemp("tls-mariadb")
    try:
        server = TlsMariaDB(ServerHome.make(home, "mysql"), database_ca).start()
    except Exception as exc:  # no mariadbd, or it did not start
        unavailable(f"the TLS MariaDB did not start: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pgbouncer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction mode before the shared PostgreSQL."""
    home = tmp_path_factory.mktemp("pgbouncer")
    try:
        pooler = PgBouncer(ServerHome.make(home, "postgres")).start()
    except Exception as exc:  # no pgbouncer (.ci/services installs it), or it did not start
        unavailable(f"PgBouncer did not start: {exc}")
    yield pooler
    pooler.stop()


@pytest.fixture(scope="session")
def acl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclKafka]:
    """Apache Kafka enforcing ACLs for the user ``worker`` (whatever ``TEST_BROKER`` says)."""
    folder = tmp_path_factory.mktemp("acl-kafka")
    try:
        kafka = AclKafka(users=("worker",), log_dir=folder)
        kafka.start()
    except Exception as exc:  # no Java, no Maven, or it did not start
        unavailable(f"the Apache Kafka with ACLs did not start: {exc}")
    yield kafka
    kafka.stop()


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    """A Tansu broker, for the tests that need a broker without idempotent producers."""
    local = LocalBroker(log_path=tmp_path_factory.mktemp("tansu") / "tansu.log")
    try:
        local.start()
    except Exception as exc:  # no binary (the demo extra), or it did not start
        unavailable(f"the Tansu broker did not start: {exc}")
    yield local
    local.stop()


def _new_stream(url: str, bootstrap: str) -> Stream:
    tag = uuid.uuid4().hex[:10]
    return Stream(
        broker_url=url,
        bootstrap=bootstrap,
        topic=f"orders-{tag}",
        app_id=f"eo-test-{tag}",
        partitions=PARTITIONS,
    )


@pytest.fixture
def stream(broker: SharedBroker) -> Stream:
    """A topic and consumer group (APP_ID) no other test uses."""
    return _new_stream(broker.url, broker.bootstrap)


@pytest.fixture
def tansu_stream(tansu: LocalBroker) -> Stream:
    """A topic and consumer group of this test's own on the Tansu broker."""
    return _new_stream(tansu.url, tansu.bootstrap)


@pytest.fixture
async def topic(stream: Stream) -> AsyncIterator[OrderTopic]:
    """The test's topic, created with ``PARTITIONS`` partitions before any worker starts."""
    async with OrderTopic(stream) as order_topic:
        yield order_topic


@pytest.fixture
async def make_database(tmp_path: Path) -> AsyncIterator[Callable[[str], Awaitable[str]]]:
    """``await make_database(backend)``: a fresh database URL; every one is dropped afterwards."""
    databases = Databases(tmp_path)

    async def create(backend: str) -> str:
        try:
            return await databases.create(backend)
        except ServiceUnavailable as exc:
            unavailable(str(exc))

    yield create
    await databases.drop_all()


@pytest.fixture
def backend() -> str:
    """The database backend of a test that does not parametrise it."""
    return "postgresql"


@pytest.fixture
async def database_url(backend: str, make_database: Callable[[str], Awaitable[str]]) -> str:
    """A fresh database on ``backend``."""
    return await make_database(backend)


@pytest.fixture
async def migrated_database(database_url: str) -> str:
    """``database_url`` with the framework's schema (for tests that run no worker)."""
    await upgrade_to_head(database_url)
    return database_url


@pytest.fixture
def proxy(database_url: str) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the server of ``database_url`` (``through`` gives its URL)."""
    with database_proxy(database_url) as running:
        yield running


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """Reads back ``database_url``."""
    database = Database(database_url)
    yield database
    await database.dispose()


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on ``database_url`` with the framework's tables and the ``effect`` table."""
    eng = create_engine(database_url)
    async with eng.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
        await conn.run_sync(test_metadata.create_all)
    yield eng
    await eng.dispose()


@pytest.fixture
def workers(
    request: pytest.FixtureRequest,
    stream: Stream,
    make_database: Callable[[str], Awaitable[str]],
    tmp_path: Path,
) -> Iterator[Workers]:
    """Starts workers on ``stream``; kills what still runs before the databases are dropped."""
    started = Workers(stream, tmp_path / "workers")
    request.node.stash[_WORKERS] = started
    yield started
    started.kill_all()


@pytest.fixture
def redis_url() -> str:
    """A reachable Redis (for workers started with ``REDIS_URL``)."""
    client = Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except (RedisError, OSError) as exc:
        unavailable(f"Redis at {REDIS_URL}: {exc!r}")
    finally:
        client.close()
    return REDIS_URL
