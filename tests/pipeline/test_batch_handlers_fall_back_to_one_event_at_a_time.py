"""A raising batch handler costs the batch one re-run, event by event; only the bad event fails.

Contract: when a ``batch=True`` handler raises, the batch's transaction rolls
back whole (effects and after-commit callbacks of every event in it) and the
batch runs again with one event per call, each in a savepoint: the handler
then receives one-element lists, the bad event alone fails (a
``failed_event`` row for its consumer, routed to a retry tier or the DLT),
its aggregate's later versions park, and every other event is applied
exactly once (one effect, one dedup record, one after-commit callback). The
example ``inventory-service`` handler's ``PermanentError`` takes the same
path to the DLT as ``non-retryable``.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

import handlers
from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, default_registry, handler
from handlers.tables import example_metadata, inventory_stock
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, write_effect

FAILED = {Kind.RETRIED, Kind.DEAD_LETTERED}


async def test_only_the_bad_event_fails_and_the_rest_apply_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[list[str]] = []
    sent: list[str] = []

    @handler("OrderPaid", consumer="points", batch=True, registry=registry)
    async def on_paid(events: list[Event], ctx: HandlerContext) -> None:
        calls.append([e.event_id for e in events])
        for event in events:
            await write_effect(event, ctx)  # written first, so the rollback has something to undo
            ctx.after_commit(lambda event_id=event.event_id: _send(sent, event_id))
        if any(e.event_id == "a2" for e in events):
            raise ValueError("points service rejected a2")

    arrival = [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("a", 3)]
    batch = [records.event(f"{agg}{v}", aggregate_id=agg, version=v) for agg, v in arrival]

    outcomes = await make_processor().process(batch)

    assert calls == [
        ["a1", "b1", "c1"],  # the fast attempt, rolled back when ...
        ["a2", "b2"],  # ... this call raised
        ["a1"],
        ["b1"],
        ["c1"],
        ["a2"],
        ["b2"],
    ]
    by_event = dict(kinds(outcomes))
    assert {e: k for e, k in by_event.items() if k not in FAILED} == {
        "a1": Kind.APPLIED,
        "b1": Kind.APPLIED,
        "c1": Kind.APPLIED,
        "b2": Kind.APPLIED,
        "a3": Kind.PARKED,
    }
    assert by_event["a2"] in FAILED
    assert await db.effects() == ["a1", "b1", "c1", "b2"]
    assert sorted(sent) == ["a1", "b1", "b2", "c1"]
    assert await db.consumed("points") == ["a1", "b1", "b2", "c1"]
    assert await db.parked("points") == ["a3"]
    assert (await db.version("points", "a"), await db.version("points", "b")) == (1, 2)
    [failure] = await db.failed("points")
    assert (failure["event_id"], failure["reason"]) == ("a2", "retryable")
    assert failure["exception_type"] == "builtins.ValueError"


async def test_the_inventory_permanent_error_fails_only_its_order(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(example_metadata.create_all)
    for event_type in ("OrderCreated", "OrderCancelled"):
        for spec in default_registry.handlers_for(handlers.inventory.CONSUMER, event_type):
            registry.add(spec)

    def created(order_id: str, *skus: str, version: int = 1) -> dict[str, object]:
        items = [{"sku": sku, "qty": 1} for sku in skus]
        return {
            "event_type": "OrderCreated",
            "aggregate_id": order_id,
            "version": version,
            "data": {
                "orderId": order_id,
                "orderNo": "N",
                "userId": "u",
                "amount": "1",
                "items": items,
            },
        }

    await make_processor().process([records.event("o-1:1", **created("o-1", "A"))])

    # o-1 created again (unversioned, as a producer bug would) naming one more sku.
    repeat = created("o-1", "A", "B") | {"version": None}
    outcomes = await make_processor().process(
        [
            records.event("o-2:1", **created("o-2", "A", "B")),
            records.event("o-1:again", **repeat),
            records.event("o-3:1", **created("o-3", "B")),
        ]
    )

    by_event = dict(kinds(outcomes))
    assert (by_event["o-2:1"], by_event["o-3:1"]) == (Kind.APPLIED, Kind.APPLIED)
    assert by_event["o-1:again"] is Kind.DEAD_LETTERED
    [failure] = await db.failed(handlers.inventory.CONSUMER)
    assert (failure["event_id"], failure["reason"]) == ("o-1:again", "non-retryable")
    async with engine.connect() as conn:
        rows = (await conn.execute(select(inventory_stock))).all()
    stock = {sku: reserved for sku, reserved in rows}
    assert stock == {"A": 2, "B": 2}


async def _send(sent: list[str], event_id: str) -> None:
    sent.append(event_id)
