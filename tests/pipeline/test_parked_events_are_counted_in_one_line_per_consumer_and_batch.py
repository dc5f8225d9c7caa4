"""Parked events are counted, not logged one by one, at INFO.

Contract: a producer's swapped versions park, and a busy worker meets many of them (each
is in the database, where ``trace`` finds it). At INFO a batch gives one line per consumer
for its parked events, with the count as a field, naming the first three and what each
waits for; the line of each is at DEBUG, as an applied event's is. A stale event, which
leaves no row, keeps its own INFO line, and failures theirs (see
``test_failures_are_logged_as_warnings_and_dead_letters_as_errors``).
"""

from __future__ import annotations

import logging

import pytest

from app.context import HandlerContext
from app.monitoring.progress import log_outcomes
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import MakeProcessor


def register(registry: Registry) -> None:
    for consumer in ("points", "inventory"):

        @handler("OrderPaid", consumer=consumer, registry=registry)
        async def apply(event: Event, ctx: HandlerContext) -> None:
            return None


async def test_a_batch_counts_its_parked_events_in_a_line_per_consumer(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register(registry)
    processor = make_processor()
    await processor.process([records.event("first", aggregate_id="o-9", version=1)])
    batch = [
        records.event("early-1", aggregate_id="o-1", version=2),
        records.event("early-2", aggregate_id="o-2", version=3),
        records.event("early-3", aggregate_id="o-3", version=2),
        records.event("early-4", aggregate_id="o-4", version=2),
        records.event("again", aggregate_id="o-9", version=1),  # o-9 is at 1: stale
    ]
    outcomes = await processor.process(batch)

    with caplog.at_level(logging.INFO, logger="effectively_once"):
        log_outcomes(outcomes)
    lines = [(r.levelno, r.getMessage(), getattr(r, "count", None)) for r in caplog.records]
    parked = (
        ": 4 event(s) parked in this batch, waiting for earlier versions: "
        "event early-1 (Order o-1 at version 2, waiting for version 1), "
        "event early-2 (Order o-2 at version 3, waiting for version 1), "
        "event early-3 (Order o-3 at version 2, waiting for version 1) and 1 more"
    )
    assert sorted(lines) == [
        (logging.INFO, "event again stale for inventory: version 1 <= last applied 1", None),
        (logging.INFO, "event again stale for points: version 1 <= last applied 1", None),
        (logging.INFO, "inventory" + parked, 4),
        (logging.INFO, "points" + parked, 4),
    ]

    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="effectively_once"):
        log_outcomes(outcomes)
    each = [r for r in caplog.records if r.getMessage().startswith("event early-")]
    assert len(each) == 8 and all(r.levelno == logging.DEBUG for r in each)
    assert len(caplog.records) == 10 + 2  # every event's line, and the two counts
