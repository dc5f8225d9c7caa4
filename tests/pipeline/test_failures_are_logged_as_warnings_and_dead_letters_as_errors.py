"""A failure is never logged as routine: a handler failure is a WARNING, a dead letter an ERROR.

Contract: when a handler raises, every log record about that event is at WARNING or
above: the batch's re-run, with the exception's traceback attached (as ``exc_text``,
scrubbed) under ``FAILURE_DETAIL=full`` and none by default, and the ``retried``
outcome, which names the tier topic and the exception's type and message. Its
``dead-lettered`` outcome (retries run out, or a non-retryable failure) is an ERROR, as
is poison whose DLT record is written now: one line, naming the record by where it was
read, with its eventType, reason and error, and those as fields. Poison read again,
whose DLT record was written before, is one INFO line: nothing new went to the DLT.
Outcomes that are no failure (applied, parked) stay below WARNING.
"""

from __future__ import annotations

import logging

import orjson
import pytest

from app.context import HandlerContext
from app.errors import PermanentError
from app.failure_detail import FailureDetail, FailureDetailPolicy
from app.monitoring.progress import log_outcomes
from app.pipeline.outcomes import Outcome
from app.pipeline.route import FailureRouter
from app.records import RawRecord
from app.registry import Registry, handler
from dlq.policy import RetryPolicy
from dlq.topics import retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import MakeProcessor, Outbox

DELAYS = (1.0,)


def register(registry: Registry, error: Exception) -> None:
    """``points`` raises ``error`` for ``bad``, and applies anything else."""

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "bad":
            raise error


async def processed(
    make_processor: MakeProcessor,
    batch: list[RawRecord],
    caplog: pytest.LogCaptureFixture,
    detail: FailureDetail = FailureDetail.MESSAGE,
) -> list[Outcome]:
    """Run ``batch`` and log its outcomes as the worker does, capturing every level."""
    caplog.clear()
    router = FailureRouter(RetryPolicy(TOPIC, DELAYS), detail=FailureDetailPolicy(detail))
    with caplog.at_level(logging.DEBUG, logger="effectively_once"):
        outcomes = await make_processor(delays=DELAYS, router=router).process(batch)
        log_outcomes(outcomes)
    return outcomes


def about(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


@pytest.mark.parametrize("detail", [FailureDetail.MESSAGE, FailureDetail.FULL])
async def test_a_handler_failure_is_a_warning_with_its_traceback_in_full(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    caplog: pytest.LogCaptureFixture,
    detail: FailureDetail,
) -> None:
    register(registry, ValueError("no points for bad"))
    batch = [
        records.event("good", aggregate_id="o-1", version=1),
        records.event("bad", aggregate_id="o-2", version=1),
        records.event("later", aggregate_id="o-2", version=2),
    ]

    await processed(make_processor, batch, caplog, detail)

    failure = about(caplog, "no points for bad")
    assert failure and all(r.levelno == logging.WARNING for r in failure)
    assert not any(r.exc_info for r in failure)  # its own traceback would go unscrubbed
    traces = [r.exc_text for r in failure if r.exc_text]
    if detail is FailureDetail.FULL:
        [trace] = traces
        assert trace.startswith("Traceback") and "ValueError: no points for bad" in trace
    else:
        assert traces == []
    [retried] = about(caplog, "event bad retried")
    assert retried.levelno == logging.WARNING
    assert retry_topic(TOPIC, 1) in retried.getMessage()
    assert "ValueError: no points for bad" in retried.getMessage()
    for routine in ("event good applied", "event later parked"):
        [record] = about(caplog, routine)
        assert record.levelno < logging.WARNING


async def test_a_dead_letter_is_an_error(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    outbox: Outbox,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register(registry, ValueError("still no points"))
    await processed(make_processor, [records.event("bad")], caplog)
    [to_tier] = await outbox.to(retry_topic(TOPIC, 1))

    await processed(make_processor, [records.delivered(to_tier)], caplog)

    [dead] = about(caplog, "event bad dead-lettered")
    assert dead.levelno == logging.ERROR
    assert "retries-exhausted" in dead.getMessage()
    assert "ValueError: still no points" in dead.getMessage()


async def test_a_non_retryable_failure_is_an_error(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register(registry, PermanentError("never"))

    await processed(make_processor, [records.event("bad")], caplog)

    [dead] = about(caplog, "event bad dead-lettered")
    assert dead.levelno == logging.ERROR
    assert "non-retryable" in dead.getMessage()


async def test_poison_is_an_error_when_dead_lettered_and_info_when_read_again(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register(registry, ValueError("unused"))
    env = envelope("poisoned")
    del env["occurredAt"]
    poison = records.raw(orjson.dumps(env))

    await processed(make_processor, [poison], caplog)
    [line] = about(caplog, "poison")
    where = f"{poison.topic}[{poison.partition}]@{poison.offset}"
    assert line.levelno == logging.ERROR
    # Its envelope failed, but the eventId it names is kept (a column holds it).
    assert line.getMessage().startswith(f"event poisoned poison at {where}: ")
    assert "invalid-schema (InvalidSchemaError: envelope: occurredAt" in line.getMessage()
    fields = {key: getattr(line, key, None) for key in ("outcome", "eventType", "topic", "offset")}
    assert fields == {
        "outcome": "poison",
        "eventType": "OrderPaid",
        "topic": poison.topic,
        "offset": poison.offset,
    }

    await processed(make_processor, [poison], caplog)
    [again] = about(caplog, "poison")
    assert again.levelno == logging.INFO
    assert where in again.getMessage()
