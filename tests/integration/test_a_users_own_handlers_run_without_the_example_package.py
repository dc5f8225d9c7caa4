"""A worker of the framework without ``handlers/`` runs a user's package with its own tables.

Contract: a worker started from a copy of the framework without the example
package (``tests/framework_copy.py``), with ``HANDLER_MODULES=shop``,
migrates PostgreSQL to the framework's tables plus the one ``shop``'s own
migration declares (none of the example's), and applies ``shop``'s events
once each, a duplicate included.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from app.db.engine import create_engine
from app.db.tables import metadata
from app.demo.envelopes import encode, envelope
from tests.framework_copy import CONSUMER, TABLE, framework_without_examples
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


def paid(invoice: str, customer: str, cents: int) -> dict[str, object]:
    return envelope(
        "InvoicePaid", invoice, 1, {"customer": customer, "cents": cents}, aggregate_type="Invoice"
    )


async def test_a_worker_without_the_examples_applies_the_users_events(
    topic: OrderTopic, workers: Workers, database_url: str, tmp_path: Path
) -> None:
    copy = framework_without_examples(tmp_path / "service")
    worker = workers.start(database_url, handler_modules="shop", env={"PYTHONPATH": str(copy)})
    first = paid("inv-1", "acme", 1_250)
    sent = [first, paid("inv-2", "acme", 50), paid("inv-3", "zeta", 7), first]  # one duplicate

    await topic.send(encode(event) for event in sent)
    await topic.drained(workers=[worker])

    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
            revenue = (await conn.execute(text(f"SELECT customer, cents FROM {TABLE}"))).all()
            consumed = await conn.scalar(
                text("SELECT COUNT(*) FROM consumed_event WHERE consumer_group = :c"),
                {"c": CONSUMER},
            )
    finally:
        await engine.dispose()
    assert tables == set(metadata.tables) | {
        TABLE,
        "effectively_once_version",
        "effectively_once_version_shop",
    }
    assert sorted(tuple(row) for row in revenue) == [("acme", 1_300), ("zeta", 7)]
    assert consumed == 3
