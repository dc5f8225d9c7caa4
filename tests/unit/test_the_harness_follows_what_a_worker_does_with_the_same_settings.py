"""The harness does what a worker with the same settings does, and says what it cannot.

Contract: a record naming no aggregate type is of the harness's
``default_aggregate_type`` (a worker's ``DEFAULT_AGGREGATE_TYPE``), so a version sent
without one follows the versions of that type (before, the harness always took
``ORDER`` and parked what the worker applied). An event a handler emits to the topic
the harness reads comes back to that topic's consumers with ``deliver_emitted``, as the
relay and the broker bring it back to a worker, once; events emitted elsewhere do not.
A record sent on a partition of its own keeps it (its DLT record names it). A failing
handler's stack trace is logged and carried by its DLT record (``failure_detail``,
``full`` by default here). A consumer name no handler has is refused, naming the nearest
(before, ``send(..., consumer=typo)`` returned no outcome, and a test asserting on all
of them passed). ``handler_timeout=0`` is no limit, as ``HANDLER_TIMEOUT_SECONDS=0`` is a
worker's (before, every handler that awaited was cut off at once). ``ctx.after_commit``
given a coroutine (the call, not the function) is the handler's failure, saying so,
rather than a log line after the commit. An after-commit callback that raises is listed
in ``after_commit_failures`` (consumer, callback, exception), the event applied and the
callbacks after it run (before, a worker's log line was all there was, and a test could
not assert on it).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from app.testing import Harness, Kind, Records, event

_names = count()

SERVICE = """\
import asyncio

from app import Envelope, HandlerContext, NewEvent, handler
from schemas.order import OrderCancelled, OrderCreated, OrderPaid

TOPIC = "{topic}"


@handler("OrderCreated", consumer="{package}-orders")
async def created(event: Envelope[OrderCreated], ctx: HandlerContext) -> None:
    if event.event_id == "loops":
        return
    ctx.emit(NewEvent(TOPIC, "OrderCancelled", "ORDER", event.aggregate_id, {{
        "orderId": event.aggregate_id, "userId": "u-1", "reason": "test",
    }}))
    ctx.emit(NewEvent("elsewhere", "OrderCancelled", "ORDER", event.aggregate_id, {{
        "orderId": event.aggregate_id, "userId": "u-1", "reason": "test",
    }}))


@handler("OrderCancelled", consumer="{package}-audit")
async def cancelled(event: Envelope[OrderCancelled], ctx: HandlerContext) -> None:
    pass


@handler("OrderPaid", consumer="{package}-orders")
async def paid(event: Envelope[OrderPaid], ctx: HandlerContext) -> None:
    if event.event_id == "naps":
        await asyncio.sleep(0.01)
    if event.event_id == "broken":
        raise KeyError("amount_cents")
    if event.event_id == "called":
        async def notify() -> None:
            pass

        ctx.after_commit(notify())
    if event.event_id == "notifies":
        async def mail_down() -> None:
            raise ConnectionRefusedError("smtp: connection refused")

        ctx.after_commit(mail_down)
        ctx.after_commit(lambda: SENT.append(event.event_id))


SENT: list[str] = []
"""

PAID = {"orderId": "o-1", "userId": "u-1", "amount": "5.00", "paidAt": "2024-05-01T12:00:00Z"}
CREATED = {"orderId": "o-1", "orderNo": "n-1", "userId": "u-1", "amount": "5.00"}


@pytest.fixture
def package(tmp_path: Path) -> Iterator[str]:
    name = f"fidelity{next(_names)}"
    (tmp_path / f"{name}.py").write_text(SERVICE.format(package=name, topic="orders-in"))
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(tmp_path))
        yield name


def without_type(envelope: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in envelope.items() if k != "aggregateType"}


@pytest.mark.parametrize(
    ("default", "second"),
    [("Account", Kind.APPLIED), ("ORDER", Kind.PARKED)],
)
async def test_a_record_without_an_aggregate_type_is_of_the_default_type(
    package: str, default: str, second: Kind
) -> None:
    first = event("OrderCreated", "o-1", 1, CREATED, aggregate_type="Account", event_id="loops")
    then = without_type(event("OrderPaid", "o-1", 2, PAID))
    async with Harness(package, default_aggregate_type=default) as h:
        outcomes = await h.send(first, then, consumer=f"{package}-orders")

    assert [o.kind for o in outcomes] == [Kind.APPLIED, second]


async def test_an_event_emitted_to_the_topic_read_comes_back_once(package: str) -> None:
    async with Harness(package, topic="orders-in") as h:
        sent = await h.send(event("OrderCreated", "o-1", 1, CREATED), consumer=f"{package}-orders")
        back = await h.deliver_emitted(consumer=f"{package}-audit")
        again = await h.deliver_emitted()
        emitted = await h.emitted()

    assert [(o.consumer, o.kind) for o in sent] == [(f"{package}-orders", Kind.APPLIED)]
    assert [(o.consumer, o.kind) for o in back] == [(f"{package}-audit", Kind.APPLIED)]
    assert back[0].event_id == emitted[0]["eventId"]
    assert again == []
    assert len(emitted) == 2  # the one for "elsewhere" is another worker's


async def test_a_record_keeps_its_partition(package: str) -> None:
    record = Records("orders-in", partition=3).raw(b"not json", key=b"k")
    async with Harness(package, topic="orders-in") as h:
        [outcome] = await h.send(record)
        [letter] = await h.dead_letters()

    assert outcome.kind == Kind.POISON
    assert dict(letter.headers)["dlt-original-partition"] == b"3"


async def test_a_failing_handlers_trace_is_logged_and_dead_lettered(
    package: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with Harness(package, retry_delays=()) as h:
        orders = f"{package}-orders"
        [outcome] = await h.send(
            event("OrderPaid", "o-1", 1, PAID, event_id="broken"), consumer=orders
        )
        [letter] = await h.dead_letters()

    assert outcome.kind == Kind.DEAD_LETTERED
    trace = dict(letter.headers)["dlt-exception-stacktrace"].decode()
    assert 'raise KeyError("amount_cents")' in trace
    assert any('raise KeyError("amount_cents")' in (r.exc_text or "") for r in caplog.records)


async def test_a_consumer_no_handler_has_is_refused_by_name(package: str) -> None:
    async with Harness(package) as h:
        with pytest.raises(ValueError, match=f"did you mean '{package}-orders'"):
            await h.send(event("OrderPaid", "o-1", 1, PAID), consumer=f"{package}_orders")
        with pytest.raises(ValueError, match="no handler here is for consumer 'billing'"):
            await h.retry(consumer="billing")


async def test_after_commit_given_a_call_fails_the_handler_saying_so(package: str) -> None:
    async with Harness(package) as h:
        orders = f"{package}-orders"
        [outcome] = await h.send(
            event("OrderPaid", "o-1", 1, PAID, event_id="called"), consumer=orders
        )

    assert outcome.kind == Kind.RETRIED
    assert "pass the function, not its call" in (outcome.error or "")


async def test_an_after_commit_callback_that_raises_is_listed_and_the_rest_run(
    package: str,
) -> None:
    async with Harness(package) as h:
        orders = f"{package}-orders"
        [outcome] = await h.send(
            event("OrderPaid", "o-1", 1, PAID, event_id="notifies"), consumer=orders
        )

    assert outcome.kind == Kind.APPLIED, outcome
    [failure] = h.after_commit_failures
    assert failure.consumer == orders
    assert failure.callback.endswith("mail_down")
    assert isinstance(failure.error, ConnectionRefusedError)
    assert importlib.import_module(package).SENT == ["notifies"]


async def test_a_handler_timeout_of_0_is_no_limit(package: str) -> None:
    async with Harness(package, handler_timeout=0) as h:
        orders = f"{package}-orders"
        [outcome] = await h.send(
            event("OrderPaid", "o-1", 1, PAID, event_id="naps"), consumer=orders
        )

    assert outcome.kind == Kind.APPLIED, outcome
