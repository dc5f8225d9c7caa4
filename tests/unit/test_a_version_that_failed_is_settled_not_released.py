"""A missing version that was sent and failed is settled by replay or skip, not released.

Contract: a consumer's parked events wait for a version whose event failed (its row in
``failed_event``, dead, retrying or poison, not settled). ``trace`` of a parked event
names that failure and the commands that settle it (``dlq replay --event-id`` once fixed,
``dlq skip --event-id``; for poison, ``--for-consumer`` the waiting consumer), not
``dlq release``; ``dlq release`` refuses such a version, naming it and the same
commands, and publishes nothing, even with ``--execute``: released, the version was
taken while its failure stayed open, dead in ``dlq list``, replayable, its alert on.
A version still retrying (its record in a retry tier) is named as such: it comes back by
itself, and neither replay nor skip can act on it before it is dead (it is in no DLT).
Poison holds the version for every consumer that misses it, whatever its row says (a
skip another consumer took marks it ``skipped``). A version whose own failure was settled
since, or that never came, is released as before.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import insert

from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.db.tables import aggregate_version, failed_event, parked_event
from app.trace.query import trace_event
from dlq.commands import Target
from dlq.errors import CommandError
from dlq.gaps import Release, release

AT = datetime(2026, 12, 1, tzinfo=UTC)
CONSUMER = "inventory-service"
AGG = {"aggregate_type": "Order", "aggregate_id": "o-7"}
PARKED = "ev-v3"


def failure(consumer: str, version: int, status: str, event_id: str) -> dict[str, Any]:
    return {
        "consumer_group": consumer,
        "topic": "orders",
        "partition": 0,
        "offset": version,
        "event_id": event_id,
        "event_type": "OrderPaid",
        **AGG,
        "aggregate_version": version,
        "reason": "retries-exhausted" if consumer else "invalid-schema",
        "exception_type": "builtins.ValueError",
        "exception_message": "bad",
        "record_headers": "[]",
        "status": status,
        "attempts": 3,
        "first_failed_at": AT,
        "last_failed_at": AT,
    }


async def build(url: str, failures: list[dict[str, Any]]) -> None:
    await upgrade_to_head(url)
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(aggregate_version),
            [{"consumer_group": CONSUMER, **AGG, "last_version": 1, "updated_at": AT}],
        )
        await conn.execute(
            insert(parked_event),
            [
                {
                    "consumer_group": CONSUMER,
                    "event_id": PARKED,
                    **AGG,
                    "aggregate_version": 3,
                    "event_type": "OrderCancelled",
                    "topic": "orders",
                    "partition": 0,
                    "offset": 9,
                    "record_key": b"o-7",
                    "record_value": b"{}",
                    "record_headers": "[]",
                    "parked_at": AT,
                }
            ],
        )
        if failures:
            await conn.execute(insert(failed_event), failures)
    await engine.dispose()


def database(tmp_path: Path, failures: list[dict[str, Any]]) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'gap.db'}"
    asyncio.run(build(url, failures))
    return url


async def parked_detail(url: str) -> str:
    engine = create_engine(url)
    async with engine.connect() as conn:
        found = await trace_event(conn, PARKED, [CONSUMER])
    await engine.dispose()
    (finding,) = found.findings
    assert finding.state == "parked"
    return finding.detail


def released(url: str, execute: bool) -> str:
    console = Console(record=True, width=400)
    asyncio.run(
        release(no_broker(url), CONSUMER, ("Order", "o-7"), execute, console, Release("ops"))
    )
    return console.export_text()


def test_a_dead_version_is_named_with_replay_and_skip(tmp_path: Path) -> None:
    url = database(tmp_path, [failure(CONSUMER, 2, "dead", "ev-v2")])
    remedy = (
        "python -m dlq replay --event-id ev-v2 once fixed, or python -m dlq skip --event-id ev-v2"
    )

    detail = asyncio.run(parked_detail(url))
    assert detail == (
        f"version 3 waits for version 2, which failed (event ev-v2: dead, retries-exhausted): "
        f"{remedy}"
    )
    console = Console(record=True, width=400)
    with pytest.raises(CommandError, match=r"version\(s\) 2 were sent and failed"):
        # No broker client: the refusal comes before anything could be published.
        asyncio.run(
            release(no_broker(url), CONSUMER, ("Order", "o-7"), True, console, Release("ops"))
        )
    assert f"version 2 failed (event ev-v2: dead, retries-exhausted): {remedy}" in (
        console.export_text()
    )


def test_a_retrying_version_is_named_as_coming_back_by_itself(tmp_path: Path) -> None:
    url = database(tmp_path, [failure(CONSUMER, 2, "retrying", "ev-v2")])
    waits = (
        "failed (event ev-v2: retrying, retries-exhausted): it comes back from its retry tier "
        "by itself, and goes to the DLT if its last tier fails too; nothing to replay or skip "
        "before that: python -m app trace ev-v2"
    )

    assert asyncio.run(parked_detail(url)) == f"version 3 waits for version 2, which {waits}"
    console = Console(record=True, width=400)
    with pytest.raises(CommandError, match=r"version\(s\) 2 were sent and failed: see above"):
        asyncio.run(
            release(no_broker(url), CONSUMER, ("Order", "o-7"), True, console, Release("ops"))
        )
    assert f"version 2 {waits}" in console.export_text()
    assert "dlq replay" not in console.export_text()


@pytest.mark.parametrize("status", ["dead", "skipped"])
def test_poison_of_the_version_is_skipped_for_the_waiting_consumer(
    tmp_path: Path, status: str
) -> None:
    """Also once another consumer took a skip of it (its row ``skipped``): this one still
    misses the version, and the poison is what holds it."""
    url = database(tmp_path, [failure("", 2, status, "ev-v2")])

    detail = asyncio.run(parked_detail(url))
    assert detail.endswith(
        "(event ev-v2: poison, invalid-schema): python -m dlq replay --event-id ev-v2 once "
        f"fixed, or python -m dlq skip --event-id ev-v2 --for-consumer {CONSUMER}"
    ), detail


@pytest.mark.parametrize("failures", [[], [failure(CONSUMER, 2, "skipped", "ev-v2")]])
def test_a_version_never_sent_or_settled_is_released(
    tmp_path: Path, failures: list[dict[str, Any]]
) -> None:
    url = database(tmp_path, failures)

    assert "never sent? python -m dlq release" in asyncio.run(parked_detail(url))
    assert "would give up version(s) 2; add --execute" in released(url, execute=False)


def no_broker(url: str) -> Target:
    """A target whose broker is never asked (a refused release publishes nothing)."""
    return Target(None, url, "orders.DLT", 60.0)  # type: ignore[arg-type]
