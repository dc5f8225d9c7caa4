"""A handler package with a long dotted name migrates on each database.

Contract: a package's version table is named after it and cut to an identifier's size
(63 characters); Alembic names that table's primary key ``<table>_pkc``, four more. A
table named at the limit gets no such key, so that PostgreSQL (63) and MariaDB (64)
create it, and the package's revisions run: its table exists and its version table
records its head. (On PostgreSQL the migration failed with ``IdentifierError``, and the
worker crashed at every start.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import inspect, text

from app.db.engine import create_engine
from app.db.histories import MAX_NAME, version_table_of
from app.db.migrate import upgrade_to_head
from tests.integration.support.databases import BACKENDS

pytestmark = pytest.mark.integration

PACKAGE = "tests.integration.support.a_package_whose_name_is_long_enough"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_its_revisions_run_and_are_recorded(
    backend: str, make_database: Callable[[str], Awaitable[str]]
) -> None:
    table = version_table_of(PACKAGE)
    assert len(table) == MAX_NAME  # the case under test: a name at the limit
    url = await make_database(backend)

    await upgrade_to_head(url, [PACKAGE])

    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            head = await connection.scalar(text(f"SELECT version_num FROM {table}"))
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    assert head == "long0001"
    assert "long_named_things" in tables
