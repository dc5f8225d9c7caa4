"""A retry or DLT record the broker did not take holds the batch: nothing is acked before it.

Contract: ``process()`` returns (and so lets the runtime ack the offsets) only
after every routed record was published. When the broker fails with an
infrastructure error (an ``OSError``, or aiokafka's connection and timeout
errors), the publish alone is retried in place, with the pause reported to
``on_pause``: the committed transaction is not run again (each handler ran as
often as with a healthy broker, the ``failed_event`` row is written once) and
the record is published exactly once when the broker is back. The same holds
for poison on its way to the DLT. While the broker stays down ``process()``
never returns.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.topics import dlt_topic, retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, MakeProcessor, RecordingPublisher, kinds

BROKER_ERRORS = [
    pytest.param(lambda: ConnectionRefusedError("broker:9092 refused"), id="connection-refused"),
    pytest.param(lambda: OSError("network is unreachable"), id="oserror"),
    pytest.param(lambda: TimeoutError("no ack within 30 s"), id="timeout"),
    pytest.param(lambda: KafkaConnectionError("no broker available"), id="aiokafka-connection"),
    pytest.param(lambda: KafkaTimeoutError(), id="aiokafka-timeout"),
    pytest.param(lambda: RequestTimedOutError(), id="aiokafka-request-timed-out"),
]


class Pauses:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, what: str, exc: BaseException, delay: float) -> None:
        self.seen.append(what)


def register_failing(registry: Registry, calls: list[str]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)
        raise ValueError("points service says no")


# A failing event runs twice in one process(): in the batch's fast attempt, then again
# in the attempt with one savepoint per event (see ``app.pipeline.processor``).
RUNS_OF_A_FAILING_EVENT = ["e1", "e1"]


@pytest.mark.parametrize("error", BROKER_ERRORS)
async def test_a_failing_publish_is_retried_in_place_without_running_the_batch_again(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    error: Callable[[], BaseException],
) -> None:
    calls: list[str] = []
    register_failing(registry, calls)
    broker = RecordingPublisher(fail_times=3, error=error)
    pauses = Pauses()

    outcomes = await make_processor(publisher=broker, on_pause=pauses).process(
        [records.event("e1")]
    )

    assert kinds(outcomes) == [("e1", Kind.RETRIED)]
    assert broker.attempts == 4
    assert [r.topic for r in broker.records] == [retry_topic(TOPIC, 1)]
    assert calls == RUNS_OF_A_FAILING_EVENT
    assert len(pauses.seen) == 3
    assert all("publishing" in what for what in pauses.seen)
    assert [(r["event_id"], r["status"], r["attempts"]) for r in await db.failed("points")] == [
        ("e1", "retrying", 1)
    ]


@pytest.mark.parametrize("error", BROKER_ERRORS)
async def test_poison_waits_for_the_dlt_to_take_it(
    make_processor: MakeProcessor, records: Records, db: Db, error: Callable[[], BaseException]
) -> None:
    broker = RecordingPublisher(fail_times=3, error=error)

    outcomes = await make_processor(publisher=broker).process([records.raw(b"not json")])

    assert [o.kind for o in outcomes] == [Kind.POISON]
    assert broker.attempts == 4
    assert [r.topic for r in broker.records] == [dlt_topic(TOPIC)]
    assert len(await db.failed()) == 1


async def test_while_the_broker_stays_down_process_never_returns(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_failing(registry, calls)
    broker = RecordingPublisher(fail_times=math.inf)

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(
            make_processor(publisher=broker).process([records.event("e1")]), timeout=0.15
        )

    assert broker.attempts >= 2
    assert broker.records == []
    # The transaction committed once and was not re-run while the publish kept failing.
    assert calls == RUNS_OF_A_FAILING_EVENT
    assert [r["status"] for r in await db.failed("points")] == ["retrying"]


async def test_while_the_broker_stays_down_poison_never_returns(
    make_processor: MakeProcessor, records: Records
) -> None:
    broker = RecordingPublisher(fail_times=math.inf)

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(
            make_processor(publisher=broker).process([records.raw(b"not json")]), timeout=0.15
        )

    assert broker.attempts >= 2
    assert broker.records == []
