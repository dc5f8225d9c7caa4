"""A hand-written outbox row's status is one the relay knows, spelt exactly.

Contract (migration ``0007``): on PostgreSQL, MariaDB and SQLite, an INSERT into
``outbox_event`` whose ``status`` is not exactly ``PENDING``, ``PROCESSING``,
``PUBLISHED`` or ``DEAD`` (a Go struct's zero value ``''``, a lower-case ``'pending'``)
fails in the producer's transaction (an IntegrityError, on MariaDB an OperationalError),
naming ``ck_outbox_event_status``; left out, the server writes ``PENDING``. Before, such
a row was never published and nothing said so; on MariaDB ``'pending'`` matched the
relay's case-blind scan, and the aggregate's later rows waited behind it forever. A
database built before the constraint, holding such rows, upgrades with them ``PENDING``
(they are published) and every other row as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db.engine import create_engine
from app.db.histories import FRAMEWORK, VERSION_TABLE, History
from app.db.migrate import upgrade, upgrade_to_head
from tests.integration.support.databases import BACKENDS
from tests.integration.support.outbox import rows

pytestmark = pytest.mark.integration

INSERT = (
    "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, topic, "
    "payload{column}) VALUES (:event_id, 'Order', 'o-1', 'OrderPaid', 'orders', '{{}}'{value})"
)


async def insert(url: str, event_id: str, status: str | None) -> None:
    column, value = ("", "") if status is None else (", status", ", :status")
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(INSERT.format(column=column, value=value)),
                {"event_id": event_id, "status": status},
            )
    finally:
        await engine.dispose()


async def statuses(url: str) -> dict[str, str]:
    return {row["event_id"]: row["status"] for row in await rows(url, "event_id", "status")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("status", ["", "pending", "Pending", "SENT", "PENDING "])
async def test_a_status_the_relay_does_not_know_is_refused_at_insert(
    migrated_database: str, status: str
) -> None:
    with pytest.raises(DBAPIError, match="ck_outbox_event_status"):
        await insert(migrated_database, "e-1", status)

    await insert(migrated_database, "e-2", None)
    await insert(migrated_database, "e-3", "PENDING")
    assert await statuses(migrated_database) == {"e-2": "PENDING", "e-3": "PENDING"}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_rows_written_before_with_another_status_upgrade_to_pending(
    database_url: str, tmp_path: Path
) -> None:
    versions = tmp_path / "versions"
    versions.mkdir()
    for before in sorted(FRAMEWORK.versions.glob("000[1-6]_*.py")):
        shutil.copy(before, versions)
    await upgrade(database_url, [History(versions, VERSION_TABLE)])
    written = {"empty": "", "lower": "pending", "sent": "SENT", "done": "PUBLISHED"}
    for event_id, status in written.items():
        await insert(database_url, event_id, status)

    await upgrade_to_head(database_url)

    assert await statuses(database_url) == {
        "empty": "PENDING",
        "lower": "PENDING",
        "sent": "PENDING",
        "done": "PUBLISHED",
    }
    with pytest.raises(DBAPIError, match="ck_outbox_event_status"):
        await insert(database_url, "later", "pending")
