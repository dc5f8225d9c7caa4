"""``python -m app trace <eventId>`` shows each consumer's state of one event.

Contract: from the framework's tables, per consumer: applied (when, which
version), parked (which version it waits for: the aggregate's last version + 1),
stale (no row, the aggregate already at or past the event's version), failed
(status, reason and attempts from ``failed_event``, whatever columns it has),
poison (no consumer's), skipped by an operator (the version taken when the skip
was, its handlers not run: its dedup record is no application), and, where the
registered handlers are known, a type the consumer has no handler of (its version
taken, nothing applied); and the event's
outbox rows (its own, written by this database's service, and its retry and DLT
records), also for an event no consumer has seen yet. ``--json`` prints the same as
one JSON document. An eventId nobody recorded exits 1 with a message saying why that
can be; a database that cannot be read exits 2 with one clear line and no traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import insert
from typer.testing import CliRunner

from app.__main__ import build_cli
from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.db.tables import (
    aggregate_version,
    consumed_event,
    failed_event,
    outbox_event,
    parked_event,
)
from app.trace.query import trace_event

AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SKIPPED_AT = datetime(2024, 5, 1, 13, 0, tzinfo=UTC)
EVENT = "evt-paid"
POISON = "evt-poison"
SKIPPED = "evt-skipped"
UNSENT = "evt-unsent"
AGG = {"aggregate_type": "Order", "aggregate_id": "o-1"}
CONSUMERS = ["inventory-service", "notification-service", "points-service"]


def failure(consumer: str, event_id: str, offset: int, **fields: Any) -> dict[str, Any]:
    return {
        "consumer_group": consumer,
        "topic": "orders",
        "partition": 0,
        "offset": offset,
        "event_id": event_id,
        "event_type": "OrderPaid",
        **AGG,
        "aggregate_version": 2,
        "reason": "retryable",
        "exception_type": "builtins.ValueError",
        "exception_message": "bad amount\nmore",
        "record_headers": "[]",
        "status": "retrying",
        "attempts": 2,
        "first_failed_at": AT,
        "last_failed_at": AT,
        **fields,
    }


def outbox_row(
    event_id: str, event_type: str, aggregate_type: str, aggregate_id: str, status: str, **more: Any
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "event_type": event_type,
        "aggregate_type": aggregate_type,
        "aggregate_id": aggregate_id,
        "topic": "orders",
        "payload": "{}",
        "status": status,
        "retry_count": 0,
        "created_at": AT,
        "updated_at": AT,
        "last_error": None,
        **more,
    }


async def build(url: str) -> None:
    await upgrade_to_head(url)
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(consumed_event),
            [
                {
                    "consumer_group": "points-service",
                    "event_id": EVENT,
                    "event_type": "OrderPaid",
                    **AGG,
                    "aggregate_version": 2,
                    "applied_at": AT,
                },
                {
                    "consumer_group": "points-service",
                    "event_id": SKIPPED,
                    "event_type": "OrderPaid",
                    **AGG,
                    "aggregate_version": 3,
                    "applied_at": SKIPPED_AT,
                },
            ],
        )
        await conn.execute(
            insert(parked_event),
            [
                {
                    "consumer_group": "inventory-service",
                    "event_id": EVENT,
                    **AGG,
                    "aggregate_version": 2,
                    "event_type": "OrderPaid",
                    "topic": "orders",
                    "partition": 0,
                    "offset": 7,
                    "record_key": b"o-1",
                    "record_value": b"{}",
                    "record_headers": "[]",
                    "parked_at": AT,
                }
            ],
        )
        await conn.execute(
            insert(aggregate_version),
            [
                {"consumer_group": c, **AGG, "last_version": last, "updated_at": AT}
                for c, last in [
                    ("points-service", 2),
                    ("inventory-service", None),
                    ("notification-service", 5),
                    ("audit-service", 1),
                ]
            ],
        )
        await conn.execute(
            insert(outbox_event),
            [
                outbox_row(EVENT, "OrderPaid", "Order", "o-1", "PUBLISHED"),
                outbox_row("rec-1", "retry", "effectively-once", EVENT, "PENDING"),
                outbox_row(UNSENT, "OrderCreated", "Order", "o-2", "DEAD", last_error="no topic"),
            ],
        )
        await conn.execute(
            insert(failed_event),
            [
                failure("audit-service", EVENT, 7),
                failure("points-service", SKIPPED, 8, status="skipped", aggregate_version=3),
                failure(
                    "",
                    POISON,
                    9,
                    reason="invalid-schema",
                    status="dead",
                    attempts=1,
                    event_type=None,
                    aggregate_version=None,
                ),
            ],
        )
    await engine.dispose()


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'trace.db'}"
    asyncio.run(build(url))
    yield url


async def traced(url: str, event_id: str) -> Any:
    engine = create_engine(url)
    async with engine.connect() as conn:
        found = await trace_event(conn, event_id, CONSUMERS)
    await engine.dispose()
    return found


def test_each_consumer_gets_its_state(database_url: str) -> None:
    found = asyncio.run(traced(database_url, EVENT))
    assert (found.event_type, found.aggregate_id, found.version) == ("OrderPaid", "o-1", 2)
    states = {f.consumer: (f.state, f.detail) for f in found.findings}
    assert states["points-service"] == ("applied", "version 2 applied")
    assert states["inventory-service"] == (
        "parked",
        "version 2 waits for version 1 (never sent? python -m dlq release --consumer "
        "inventory-service --aggregate Order:o-1)",
    )
    assert states["notification-service"][0] == "stale"
    assert "at version 5" in states["notification-service"][1]
    state, detail = states["audit-service"]  # not registered: found through its failure row
    assert state == "retrying"
    assert "reason retryable" in detail and "2 attempt(s)" in detail
    assert "builtins.ValueError: bad amount" in detail


def test_the_events_outbox_rows_are_shown(database_url: str) -> None:
    found = asyncio.run(traced(database_url, EVENT))
    assert [(r.kind, r.status) for r in found.outbox] == [
        ("event", "PUBLISHED"),
        ("retry", "PENDING"),
    ]
    unsent = asyncio.run(traced(database_url, UNSENT))
    assert unsent.found and unsent.findings == ()
    assert (unsent.event_type, unsent.aggregate_id) == ("OrderCreated", "o-2")
    [row] = unsent.outbox
    assert (row.status, row.last_error) == ("DEAD", "no topic")
    result = run(UNSENT, "--database-url", database_url, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "DEAD" in result.stdout and "no topic" in result.stdout


def test_a_skipped_event_is_not_shown_as_applied(database_url: str) -> None:
    found = asyncio.run(traced(database_url, SKIPPED))
    mine = [(f.state, f.at, f.detail) for f in found.findings if f.consumer == "points-service"]
    assert mine[0][0] == "skipped" and "reason retryable" in mine[0][2]  # its failure row
    assert mine[1:] == [
        ("skipped", SKIPPED_AT, "version 3 taken by an operator's skip, its handlers not run")
    ]


def test_a_type_without_a_handler_is_not_shown_as_applied(database_url: str) -> None:
    async def traced_knowing(handled: set[tuple[str, str]]) -> Any:
        engine = create_engine(database_url)
        async with engine.connect() as conn:
            found = await trace_event(conn, EVENT, CONSUMERS, lambda *pair: pair in handled)
        await engine.dispose()
        return {f.consumer: (f.state, f.detail) for f in found.findings}

    states = asyncio.run(traced_knowing(set()))
    assert states["points-service"] == (
        "no handler",
        "version 2 taken; no handler of OrderPaid registered for this consumer",
    )
    states = asyncio.run(traced_knowing({("points-service", "OrderPaid")}))
    assert states["points-service"] == ("applied", "version 2 applied")


def test_poison_is_nobodys(database_url: str) -> None:
    found = asyncio.run(traced(database_url, POISON))
    [finding] = found.findings
    assert (finding.consumer, finding.state) == ("", "dead")
    assert finding.fields["reason"] == "invalid-schema"


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(build_cli(), ["trace", *args], env=env)


def test_json_output(database_url: str) -> None:
    result = run(EVENT, "--json", "--database-url", database_url)
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    assert document["found"] is True and document["aggregateVersion"] == 2
    by_consumer = {c["consumer"]: c for c in document["consumers"]}
    assert by_consumer["points-service"]["state"] == "applied"
    assert by_consumer["audit-service"]["attempts"] == 2


def test_table_output(database_url: str) -> None:
    result = run(EVENT, "--database-url", database_url)
    assert result.exit_code == 0, result.output
    for word in ("points-service", "applied", "parked", "audit-service", "retrying"):
        assert word in result.stdout


def test_piped_table_output_keeps_its_columns(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped (no terminal, no ``COLUMNS``), the table is not cut to 80 columns: each
    consumer's detail and command are whole, for grep and scripts."""
    monkeypatch.delenv("COLUMNS", raising=False)
    result = run(EVENT, "--database-url", database_url)
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout, result.stdout
    assert "python -m dlq release --consumer inventory-service --aggregate Order:o-1" in (
        result.stdout
    ), result.stdout


def test_an_unknown_event_exits_1_with_an_explanation(database_url: str) -> None:
    result = run("nobody-knows-me", "--database-url", database_url)
    assert result.exit_code == 1
    assert "no consumer has a record of eventId nobody-knows-me" in result.stderr
    assert "stale for every consumer" in result.stderr


@pytest.mark.parametrize(
    "url",
    ["mongodb://localhost/x", "sqlite+aiosqlite:////nonexistent/dir/none.db"],
)
def test_a_bad_database_url_exits_2_without_a_traceback(url: str) -> None:
    result = run(EVENT, env={"DATABASE_URL": url})
    assert result.exit_code == 2
    assert "effectively-once trace:" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_without_handler_modules_every_consumers_rows_are_read(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service of one's own: its consumer is none of the bundled example's, which the
    # setting's default would name.
    async def shipped() -> None:
        engine = create_engine(database_url)
        async with engine.begin() as conn:
            await conn.execute(insert(consumed_event), [{
                "consumer_group": "shipping-service", "event_id": "evt-shipped",
                "event_type": "ParcelShipped", **AGG, "aggregate_version": None,
                "applied_at": AT,
            }])  # fmt: skip
        await engine.dispose()

    asyncio.run(shipped())
    monkeypatch.delenv("HANDLER_MODULES", raising=False)
    result = run("evt-shipped", "--database-url", database_url, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "shipping-service" in result.stdout and "applied" in result.stdout


def test_handler_modules_that_cannot_be_imported_are_said_and_every_row_shown(
    database_url: str,
) -> None:
    """``HANDLER_MODULES`` naming a module that cannot be imported: trace says so on stderr
    in one line and shows every consumer's rows (it went on without a word)."""
    result = run(EVENT, "--database-url", database_url, env={"HANDLER_MODULES": "no_such_pkg"})
    assert result.exit_code == 0, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("effectively-once trace: HANDLER_MODULES: cannot import 'no_such_pkg'")
    assert line.endswith("every consumer's rows are shown")
    assert "audit-service" in result.stdout
