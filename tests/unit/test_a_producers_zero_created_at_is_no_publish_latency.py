"""A producer's zero ``created_at`` is published, and is no publish latency.

Contract (``app.outbox.relay`` over SQLite and a fake broker): a row whose ``created_at``
is a producer's zero value (Go's ``time.Time{}``, 0001-01-01; Java's epoch 0) is published
like any other and counted in ``effectively_once_relay_published_total``; it is left out
of ``effectively_once_outbox_publish_latency_seconds``, whose sum it would raise by two
thousand years, and a WARNING names it once. A row written now is observed as before.
While such rows wait, they age from their ``updated_at`` (a plain-SQL insert leaves it
the server's time): in the outbox sample's oldest unpublished age, and in the ``outbox``
check of a worker without a relay (before, two thousand years: red at once). A
``created_at`` is no write time before 2000, nor as text that is no time (MySQL's
``0000-00-00`` under a relaxed ``sql_mode``, handed back as a string).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.metrics import REGISTRY
from app.monitoring.readiness import outbox
from app.outbox.monitor import sample_outbox
from app.outbox.written import write_time
from tests.unit.test_relay_publishes_each_aggregate_in_waves import FakeBroker, relay, write

LATENCY = "effectively_once_outbox_publish_latency_seconds"
ZERO_TIMES = [datetime(1, 1, 1), datetime(1970, 1, 1)]  # Go's zero time; Java's epoch 0


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_a_zero_created_at_is_published_and_left_out_of_the_latency(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    await write(engine, ("go-1", "a"), ("java-1", "b"), ("now-1", "c"))
    t = tables.outbox_event
    async with engine.begin() as conn:
        for event_id, zero in zip(("go-1", "java-1"), ZERO_TIMES, strict=True):
            await conn.execute(update(t).where(t.c.event_id == event_id).values(created_at=zero))
    before = {
        name: sample(name)
        for name in (f"{LATENCY}_count", f"{LATENCY}_sum", "effectively_once_relay_published_total")
    }
    counts, age, _ = await sample_outbox(engine)
    assert counts == {"PENDING": 3}
    assert 0 <= age < 60

    broker = FakeBroker()

    assert await relay(engine, broker).run_once() == 3

    assert sorted(broker.sent) == ["go-1", "java-1", "now-1"]
    assert (
        sample("effectively_once_relay_published_total")
        - before["effectively_once_relay_published_total"]
        == 3
    )
    assert sample(f"{LATENCY}_count") - before[f"{LATENCY}_count"] == 1
    assert 0 <= sample(f"{LATENCY}_sum") - before[f"{LATENCY}_sum"] < 60
    said = [r.getMessage() for r in caplog.records if "zero value" in r.getMessage()]
    assert len(said) == 1, said
    assert "0001-01-01" in said[0] or "1970-01-01" in said[0], said


async def test_rows_of_zero_created_at_alone_age_from_their_last_change(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("go-1", "a"), ("java-1", "b"))
    t = tables.outbox_event
    async with engine.begin() as conn:
        for event_id, zero in zip(("go-1", "java-1"), ZERO_TIMES, strict=True):
            await conn.execute(update(t).where(t.c.event_id == event_id).values(created_at=zero))

    _, age, _ = await sample_outbox(engine)
    check = await outbox(engine, limit=120)

    assert 0 <= age < 60
    assert check.ok, check
    assert check.detail.startswith("the oldest row waiting for a relay is "), check


@pytest.mark.parametrize(
    "stored",
    [datetime(1, 1, 1), datetime(1970, 1, 1), "0000-00-00 00:00:00", "", None, 0],
)
def test_a_producers_zero_value_is_no_write_time(stored: object) -> None:
    assert write_time(stored) is None


def test_a_stored_time_is_a_write_time_in_utc() -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    assert write_time(now.replace(tzinfo=None)) == now
    assert write_time(now.isoformat()) == now
    assert write_time(now - timedelta(days=365 * 20)) == now - timedelta(days=365 * 20)
