"""Routine ordering outcomes are counted, not logged one by one, at INFO.

Contract: a producer's swapped or repeated versions park or go stale, and a busy worker
meets many of them. At INFO a batch gives one line per consumer and kind (``parked``,
``stale``) with the count as a field and its first event as an example; the line of each
event is at DEBUG, as an applied event's is. Failures keep a line each (see
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


async def test_a_batch_counts_its_parked_and_stale_events_in_a_line_per_consumer(
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
        records.event("again", aggregate_id="o-9", version=1),  # o-9 is at 1: stale
    ]
    outcomes = await processor.process(batch)

    with caplog.at_level(logging.INFO, logger="effectively_once"):
        log_outcomes(outcomes)
    lines = [(r.levelno, r.getMessage(), getattr(r, "count", None)) for r in caplog.records]
    assert sorted(lines) == [
        (
            logging.INFO,
            "inventory: 1 event(s) stale in this batch (the first, event again: "
            "version 1 <= last applied 1)",
            1,
        ),
        (
            logging.INFO,
            "inventory: 3 event(s) parked in this batch (the first, event early-1: "
            "waiting for version 1)",
            3,
        ),
        (
            logging.INFO,
            "points: 1 event(s) stale in this batch (the first, event again: "
            "version 1 <= last applied 1)",
            1,
        ),
        (
            logging.INFO,
            "points: 3 event(s) parked in this batch (the first, event early-1: "
            "waiting for version 1)",
            3,
        ),
    ]

    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="effectively_once"):
        log_outcomes(outcomes)
    each = [r for r in caplog.records if r.getMessage().startswith("event ")]
    assert len(each) == 8 and all(r.levelno == logging.DEBUG for r in each)
    assert len(caplog.records) == 8 + 4  # and the four counts
