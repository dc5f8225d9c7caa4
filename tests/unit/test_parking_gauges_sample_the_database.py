"""The parking gauges are sampled from ``parked_event``.

Contract: per consumer, the number of parked events, of distinct aggregates
with a parked event, and the age of the oldest one (a naive timestamp, as
SQLite and MySQL return them, is UTC); a consumer with nothing parked is absent
from the sample (and the gauges then read 0).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert

from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.db.tables import parked_event
from app.metrics import ParkedStats
from app.monitoring.parked import sample_parked

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def parked(consumer: str, event_id: str, aggregate: str, version: int, age: float) -> dict:
    return {
        "consumer_group": consumer,
        "event_id": event_id,
        "aggregate_type": "Order",
        "aggregate_id": aggregate,
        "aggregate_version": version,
        "event_type": "OrderPaid",
        "topic": "orders",
        "partition": 0,
        "offset": version,
        "record_key": None,
        "record_value": b"{}",
        "record_headers": "[]",
        "parked_at": NOW - timedelta(seconds=age),
    }


async def test_counts_aggregates_and_the_oldest_age_per_consumer(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'parked.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(parked_event),
            [
                parked("points", "e1", "o-1", 3, age=120),
                parked("points", "e2", "o-1", 4, age=60),
                parked("points", "e3", "o-2", 2, age=10),
                parked("inventory", "e4", "o-3", 5, age=5),
            ],
        )
    stats = await sample_parked(engine, clock=lambda: NOW)
    await engine.dispose()
    assert stats == {
        "points": ParkedStats(events=3, aggregates=2, oldest_age_seconds=120.0),
        "inventory": ParkedStats(events=1, aggregates=1, oldest_age_seconds=5.0),
    }


async def test_nothing_parked_is_an_empty_sample(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    assert await sample_parked(engine, clock=lambda: NOW) == {}
    await engine.dispose()
