"""``python -m app outbox list`` piped keeps its columns, as ``trace`` and ``dlq`` do.

Contract: with no terminal and no ``COLUMNS``, the table is not cut to 80 columns: a
row's event id, aggregate and topic each stay whole on its line, for grep and scripts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import insert
from typer.testing import CliRunner

from app.__main__ import build_cli
from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.db.tables import outbox_event

EVENT_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
AGGREGATE_ID = "inv-2026-000017"
TOPIC = "billing.invoices.events.v2"


async def build(url: str) -> None:
    await upgrade_to_head(url)
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(outbox_event).values(
                event_id=EVENT_ID,
                aggregate_type="Invoice",
                aggregate_id=AGGREGATE_ID,
                event_type="InvoicePaid",
                topic=TOPIC,
                payload="{}",
                status="DEAD",
                retry_count=10,
                last_error="MessageSizeTooLargeError",
            )
        )
    await engine.dispose()


def test_a_piped_table_keeps_each_id_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'outbox.db'}"
    asyncio.run(build(url))
    monkeypatch.delenv("COLUMNS", raising=False)

    result = CliRunner().invoke(build_cli(), ["outbox", "list", "--database-url", url])

    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if EVENT_ID in line)
    assert f"Invoice {AGGREGATE_ID}" in row, result.stdout
    assert TOPIC in row, result.stdout
