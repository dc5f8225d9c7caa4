"""A batch whose records were decoded ahead (``app.runtime.ahead``) is processed alike.

Contract of ``BatchProcessor.process(records, decoded=...)``: with the records' own
``decode`` handed in, in order, the batch is not decoded again, and it has the same
outcomes and effects as when the processor decodes it: each event applied once, a
duplicate skipped, poison dead-lettered once. With a prefilter the processor asks Redis
first and decodes itself (``decodes_first`` is False).
"""

from __future__ import annotations

import pytest

from app.context import HandlerContext
from app.pipeline import processor as processor_module
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, MakeProcessor, Outbox, kinds, write_effect


def register(registry: Registry) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)


async def test_a_batch_decoded_ahead_applies_skips_and_dead_letters_as_one_decoded_in_it(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register(registry)
    first = records.event("e1", version=1)
    batch = [
        first,
        records.raw(b"not json"),
        records.again(first),
        records.event("e2", version=2),
    ]
    processor = make_processor()
    assert processor.decodes_first
    decode = processor.decoder()
    decoded = [decode(r) for r in batch]

    def decoded_again(*_: object) -> None:
        raise AssertionError("the batch was decoded again")

    monkeypatch.setattr(processor_module, "decode", decoded_again)

    outcomes = await processor.process(batch, decoded=decoded)

    assert kinds(outcomes) == [
        (None, Kind.POISON),
        ("e1", Kind.APPLIED),
        ("e1", Kind.DUPLICATE),
        ("e2", Kind.APPLIED),
    ]
    assert await db.effects() == ["e1", "e2"]
    assert await db.version("points") == 2
    assert [r.value for r in await outbox.to(dlt_topic(TOPIC))] == [b"not json"]


async def test_with_a_prefilter_the_processor_decodes_itself(
    make_processor: MakeProcessor,
) -> None:
    class NothingKnown:
        async def known(self, *_: object) -> dict[str, object]:
            return {}

    assert not make_processor(prefilter=NothingKnown()).decodes_first
