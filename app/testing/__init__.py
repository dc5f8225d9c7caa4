"""Test your handlers without a broker: ``from app.testing import Harness, event``.

``Harness`` runs the worker's own batch processor (decode, dedup, version gate,
handlers, failure routing, outbox) on SQLite, or on a database URL you give, migrated
with the framework's and your modules' migrations. Feed it envelopes as producers write
them, duplicates, swapped versions, numeric ids and all; then assert on the outcome
values, your tables, the events your handlers emitted and where failures went::

    from app.testing import Harness, Kind, event

    async def test_a_paid_invoice_counts_once() -> None:
        paid = event("InvoicePaid", "inv-1", 1, {"customer": "acme", "cents": 1250})
        async with Harness("revenue") as h:
            outcomes = await h.send(paid, paid)
            assert [o.kind for o in outcomes] == [Kind.APPLIED, Kind.DUPLICATE]
            assert await h.rows(revenue_table) == [{"customer": "acme", "cents": 1250}]

Nothing here is imported by a worker; it needs no test framework (use it from pytest
with pytest-asyncio, or from any event loop).
"""

from __future__ import annotations

from app.pipeline.after_commit import AfterCommitFailure
from app.pipeline.outcomes import Kind, Outcome
from app.testing.feed import NOW, FrozenClock, Records, event
from app.testing.harness import Harness, InfrastructurePaused, UnknownEventType

__all__ = [
    "NOW",
    "AfterCommitFailure",
    "FrozenClock",
    "Harness",
    "InfrastructurePaused",
    "Kind",
    "Outcome",
    "Records",
    "UnknownEventType",
    "event",
]
