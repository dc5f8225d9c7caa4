"""``app.testing.Harness`` runs a user's handlers as the worker would, with no broker.

Contract: for a service written outside the framework (``ledger``: its own model, table
and Alembic migration, a handler that emits to a topic of its own and one that always
fails), the harness migrates a SQLite database (a temporary one, or the URL given), and
a batch fed to it reports outcome values per event and consumer: an event applied, its
duplicate told apart, a later version parked until the earlier one comes (then both
applied, in order), ids sent as numbers read as the same ids as strings. The table holds
the committed effects, ``emitted`` the handler's events for their topic (not the
framework's own records), and a failing event goes through each retry tier (``retry``
delivers the tier's record) to the DLT, whose record ``dead_letters`` shows, naming the
deployment as a worker's does (``dlt-app-id``: the harness's ``app_id``, by default a
worker's default ``APP_ID``). Only the named modules' handlers run. An envelope of a
type no model declares (a misspelling, which a worker would take as another service's
event) is refused, naming the nearest declared type, unless sent with
``unknown_types=True``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import BigInteger, Column, MetaData, String, Table

from app.testing import Harness, Kind, UnknownEventType, event

LEDGER = '''\
"""ledger-service: a posted entry adds to its account's total and announces it."""

from pydantic import BaseModel
from sqlalchemy import BigInteger, Column, MetaData, String, Table

from app import Envelope, HandlerContext, Id, NewEvent, add_to_counter, event_model, handler

metadata = MetaData()
totals = Table(
    "ledger_totals",
    metadata,
    Column("account", String(64), primary_key=True),
    Column("cents", BigInteger, nullable=False),
)


@event_model("LedgerEntryPosted", version=1)
class LedgerEntryPosted(BaseModel):
    account: Id
    cents: int


@event_model("LedgerEntryDisputed", version=1)
class LedgerEntryDisputed(BaseModel):
    account: Id


@handler("LedgerEntryPosted", consumer="ledger-service", emits=("ledger-totals",))
async def post(event: Envelope[LedgerEntryPosted], ctx: HandlerContext) -> None:
    row = {"account": event.data.account, "cents": event.data.cents}
    await add_to_counter(ctx.session, totals, "account", "cents", [row])
    ctx.emit(NewEvent("ledger-totals", "TotalChanged", "Account", event.data.account, row))


@handler("LedgerEntryDisputed", consumer="ledger-service")
async def dispute(event: Envelope[LedgerEntryDisputed], ctx: HandlerContext) -> None:
    raise RuntimeError("disputes are not handled yet")
'''

MIGRATION = '''\
"""ledger_totals.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ledger_totals",
        sa.Column("account", sa.String(64), primary_key=True),
        sa.Column("cents", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ledger_totals")
'''

# The service's table as the test reads it (the service's own module is imported by name).
totals = Table(
    "ledger_totals",
    MetaData(),
    Column("account", String(64), primary_key=True),
    Column("cents", BigInteger, nullable=False),
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``ledger/`` with its migration, importable for the whole module."""
    folder = tmp_path_factory.mktemp("service")
    (folder / "ledger" / "migrations").mkdir(parents=True)
    (folder / "ledger" / "__init__.py").write_text(LEDGER)
    (folder / "ledger" / "migrations" / "0001_totals.py").write_text(MIGRATION)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(folder))
        yield folder


def posted(
    account: str | int, cents: int, version: int, event_id: str | None = None
) -> dict[str, object]:
    return event(
        "LedgerEntryPosted",
        account,
        version,
        {"account": account, "cents": cents},
        event_id=event_id,
        aggregate_type="Account",
    )


async def test_duplicates_swapped_versions_and_numeric_ids(service: Path) -> None:
    first = posted("100001", 500, 1, event_id="e-1")
    async with Harness("ledger") as h:
        assert h.registry.consumers == ["ledger-service"]
        outcomes = await h.send(first, first, posted(100001, 70, 3), posted(100001, 25, 2))
        assert [(o.event_id, o.kind) for o in outcomes] == [
            ("e-1", Kind.APPLIED),
            ("e-1", Kind.DUPLICATE),
            (outcomes[2].event_id, Kind.PARKED),
            (outcomes[3].event_id, Kind.APPLIED),
            (outcomes[2].event_id, Kind.APPLIED),  # the parked version, once its gap closed
        ]

        assert await h.rows(totals) == [{"account": "100001", "cents": 595}]
        emitted = await h.emitted("ledger-totals")
        assert [e["data"]["cents"] for e in emitted] == [500, 25, 70]
        assert {e["aggregateId"] for e in emitted} == {"100001"}
        assert await h.emitted("elsewhere") == []


async def test_a_failing_handler_goes_through_every_tier_to_the_dlt(
    service: Path, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'given.db'}"
    disputed = event("LedgerEntryDisputed", "a-1", 1, {"account": "a-1"}, event_id="d-1")
    async with Harness("ledger", database_url=url, retry_delays=(1, 5)) as h:
        routed = [await h.send(disputed), await h.retry(), await h.retry(), await h.retry()]

        assert [[(o.kind, o.detail) for o in outcomes] for outcomes in routed] == [
            [(Kind.RETRIED, "order-event-topic.retry.1s")],
            [(Kind.RETRIED, "order-event-topic.retry.5s")],
            [(Kind.DEAD_LETTERED, "retries-exhausted")],
            [],
        ]
        [dead] = await h.dead_letters()
        assert dict(dead.headers)["dlt-exception-type"] == b"builtins.RuntimeError"
        assert dict(dead.headers)["dlt-app-id"] == b"order-consumers"
        assert await h.emitted() == []
    assert (tmp_path / "given.db").exists()


async def test_a_misspelt_event_type_is_refused_and_one_sent_on_purpose_passes(
    service: Path,
) -> None:
    misspelt = event("LedgerEntryPostd", "a-1", 1, {"account": "a-1", "cents": 5})
    async with Harness("ledger") as h:
        with pytest.raises(UnknownEventType, match="did you mean 'LedgerEntryPosted'"):
            await h.send(posted("a-1", 5, 1), misspelt)
        assert await h.rows(totals) == []  # nothing of the batch was processed

        [outcome] = await h.send(misspelt, unknown_types=True)
        assert outcome.kind is Kind.APPLIED  # another service's event: taken, no handler run
        assert await h.rows(totals) == []
