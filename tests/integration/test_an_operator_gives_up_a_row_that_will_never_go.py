"""``python -m app outbox give-up`` lets the later rows of a row that will never go go now.

Contract: a ``PENDING`` row waiting for its next attempt (an hour away) holds the later
rows of its aggregate; ``give-up <id> --why ...`` says what it would do and changes
nothing; with ``--execute`` the row is ``DEAD`` at once, its ``last_error`` naming the
operator's give-up and the reason, and the relay publishes the later row. A row that is
not ``PENDING`` (published) is left alone and said so; with nothing given up the exit
code is 1. ``--why`` is required.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert

from app.db.engine import create_engine
from app.db.tables import outbox_event
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import app_command, rows
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration


async def _two_rows(url: str, topic: str) -> None:
    """Row 1 failed three times, its next attempt an hour away; row 2 of its aggregate."""
    now = datetime.now(UTC)
    row = {
        "aggregate_type": "Order",
        "aggregate_id": "o-1",
        "event_type": "OrderPaid",
        "topic": topic,
        "payload": "{}",
        "created_at": now,
        "updated_at": now,
    }
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(outbox_event),
                [
                    {
                        **row,
                        "event_id": "stuck",
                        "retry_count": 3,
                        "next_retry_at": now + timedelta(hours=1),
                        "last_error": "the broker refused it",
                    },
                    {
                        **row,
                        "event_id": "behind",
                        "retry_count": 0,
                        "next_retry_at": None,
                        "last_error": None,
                    },
                ],
            )
    finally:
        await engine.dispose()


async def test_a_row_given_up_lets_its_aggregates_later_rows_go(
    migrated_database: str, topic: OrderTopic, tmp_path: Path
) -> None:
    await _two_rows(migrated_database, topic.stream.topic)
    [stuck, behind] = [row["id"] for row in await rows(migrated_database)]
    url = ("--database-url", migrated_database)
    relays = Relays(tmp_path / "relays")
    try:
        relays.start(migrated_database, topic.stream.broker_url)

        code, _, err = await app_command("outbox", "give-up", str(stuck), *url)
        assert code == 2 and "--why" in err, err

        code, out, _ = await app_command(
            "outbox", "give-up", str(stuck), "--why", "topic removed", *url
        )
        assert code == 0 and "would give up 1 of 1 row(s)" in out and "dry run" in out, out
        found = await rows(migrated_database, "status")
        assert [r["status"] for r in found] == ["PENDING", "PENDING"]  # row 2 waits for row 1

        code, out, _ = await app_command(
            "outbox", "give-up", str(stuck), "--why", "topic removed", "--execute", *url
        )
        assert code == 0 and f"gave up 1 of 1 row(s): {stuck}" in out, out
        await eventually(
            lambda: rows(migrated_database, "status", "last_error"),
            lambda found: [r["status"] for r in found] == ["DEAD", "PUBLISHED"],
            what="the row given up DEAD and the one behind it published",
            within=60,
        )
        [given_up, _] = await rows(migrated_database, "last_error")
        assert given_up["last_error"].startswith("given up by an operator")
        assert given_up["last_error"].endswith(": topic removed")

        code, out, _ = await app_command(
            "outbox", "give-up", str(behind), "--why", "late", "--execute", *url
        )
        assert code == 1 and "gave up 0 of 1" in out and "left alone (not PENDING" in out, out
    finally:
        relays.kill_all()
