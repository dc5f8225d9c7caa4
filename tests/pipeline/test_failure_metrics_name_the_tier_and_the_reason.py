"""The failure metrics of a real batch carry bounded labels, and count what was written.

Contract: an event whose handler keeps failing, with tiers ``(1 s, 5 s)``, counts
once under ``effectively_once_retries_total{tier="1s"}``, then once under
``tier="5s"``: the tier's name, never the exception's text, whatever the handler
raised; when its retries have run out it counts once under
``effectively_once_dlt_records_total{reason="retries-exhausted"}`` (a reason of the
``dlt-reason`` set, never ``other``), and a non-retryable failure under
``non-retryable``. Poison counts once under its reason when its DLT record is
written; read again (a redelivery, or a new consumer group reading the topic
against the same database) it writes no DLT record, and counts none.
"""

from __future__ import annotations

import orjson

from app import metrics
from app.context import HandlerContext
from app.errors import PermanentError
from app.metrics import REGISTRY
from app.registry import Registry, handler
from dlq.topics import retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import MakeProcessor, Outbox

DELAYS = (1.0, 5.0)
RETRIES = "effectively_once_retries_total"
DLT_RECORDS = "effectively_once_dlt_records_total"


def series(name: str, consumer: str) -> dict[str, float]:
    """The samples of ``name`` for ``consumer``, by their other label's value."""
    found: dict[str, float] = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels.get("consumer") == consumer:
                other = sample.labels.get("tier", sample.labels.get("reason", ""))
                found[other] = sample.value
    return found


def moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What rose between ``before`` and ``after`` (labels that did not are left out)."""
    return {
        label: value - before.get(label, 0.0)
        for label, value in after.items()
        if value != before.get(label, 0.0)
    }


async def test_each_tier_counts_under_its_name_and_the_end_under_its_reason(
    make_processor: MakeProcessor, registry: Registry, records: Records, outbox: Outbox
) -> None:
    consumer = "metrics-tiers"

    @handler("OrderPaid", consumer=consumer, registry=registry)
    async def refuse(event: Event, ctx: HandlerContext) -> None:
        raise ValueError(f"no points for {event.event_id} today")

    processor = make_processor(delays=DELAYS)
    retries, dead = series(RETRIES, consumer), series(DLT_RECORDS, consumer)

    metrics.record_outcomes(await processor.process([records.event("e1")]), 0.1, 1)
    assert moved(retries, series(RETRIES, consumer)) == {"1s": 1}

    [to_tier_1] = await outbox.to(retry_topic(TOPIC, 1))
    metrics.record_outcomes(await processor.process([records.delivered(to_tier_1)]), 0.1, 1)
    assert moved(retries, series(RETRIES, consumer)) == {"1s": 1, "5s": 1}

    [to_tier_2] = await outbox.to(retry_topic(TOPIC, 5))
    metrics.record_outcomes(await processor.process([records.delivered(to_tier_2)]), 0.1, 1)
    assert moved(retries, series(RETRIES, consumer)) == {"1s": 1, "5s": 1}
    assert moved(dead, series(DLT_RECORDS, consumer)) == {"retries-exhausted": 1}


async def test_a_non_retryable_failure_counts_under_its_reason(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    consumer = "metrics-permanent"

    @handler("OrderPaid", consumer=consumer, registry=registry)
    async def refuse(event: Event, ctx: HandlerContext) -> None:
        raise PermanentError("this order can never earn points")

    dead = series(DLT_RECORDS, consumer)
    outcomes = await make_processor(delays=DELAYS).process([records.event("e1")])
    metrics.record_outcomes(outcomes, 0.1, 1)

    assert moved(dead, series(DLT_RECORDS, consumer)) == {"non-retryable": 1}
    assert series(RETRIES, consumer) == {}


async def test_poison_counts_once_when_its_record_is_written_not_when_read_again(
    make_processor: MakeProcessor, registry: Registry, records: Records, outbox: Outbox
) -> None:
    @handler("OrderPaid", consumer="metrics-poison", registry=registry)
    async def fine(event: Event, ctx: HandlerContext) -> None:
        pass

    env = envelope("bad")
    del env["occurredAt"]
    poison = records.raw(orjson.dumps(env))
    dead = series(DLT_RECORDS, "")

    metrics.record_outcomes(await make_processor().process([poison]), 0.1, 1)
    assert moved(dead, series(DLT_RECORDS, "")) == {"invalid-schema": 1}

    # A new consumer group on the same database reads the topic from its start.
    for _ in range(3):
        metrics.record_outcomes(await make_processor().process([poison]), 0.1, 1)

    assert len(await outbox.records()) == 1
    assert moved(dead, series(DLT_RECORDS, "")) == {"invalid-schema": 1}
