"""A worker told not to migrate stops at start, in one line, on a database never migrated.

Contract: with ``MIGRATE_ON_START=false`` and a database that answers but has none of the
framework's tables, the worker exits with code 2 before it looks for the broker, in one
line naming the database, the missing table and the command that creates it; no
traceback. (Before, it started, stayed ready, and crashed on the first record.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy.engine import make_url

from app.db.timeouts import DEFAULT_TIMEOUTS
from tests.integration.support.own_servers import free_port
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration

WITHIN = DEFAULT_TIMEOUTS.connect + 20


@pytest.fixture
def stream() -> Stream:
    """A broker nobody listens on: the worker stops before it would look for one."""
    port = free_port()
    return Stream(f"kafka://127.0.0.1:{port}", f"127.0.0.1:{port}", "orders", "eo-schema", 1)


async def test_the_worker_names_the_missing_schema(
    make_database: Callable[[str], Awaitable[str]], workers: Workers
) -> None:
    url = await make_database("postgresql")
    server = make_url(url)

    worker = workers.start(url, env={"MIGRATE_ON_START": "false"})

    assert worker.exit_code(WITHIN) == 2, worker.log()
    lines = worker.log().strip().splitlines()
    assert lines == [
        f"effectively-once: configuration error: the database at {server.host}:{server.port} "
        "has no table consumed_event: its schema was never migrated; run python -m "
        "app.db.migrate (with HANDLER_MODULES set), or start with MIGRATE_ON_START=true"
    ], worker.log()
