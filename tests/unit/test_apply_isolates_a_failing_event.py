"""The apply stage runs a consumer's handlers and sorts their failures.

Contract: ``run_handlers`` calls each handler with ``(event, ctx)`` in
registration order and stops at the first failure: an infrastructure failure
becomes ``InfrastructureError`` (the batch pauses), anything else (an ``OSError`` or
``TimeoutError`` the handler raised itself, not through the database, included)
``HandlerFailed`` carrying the spec and the cause, whose ``reason`` is
``non-retryable`` for a ``PermanentError`` or a type (or subtype) the handler
declared ``non_retryable`` or an event ``ctx.emit`` cannot write
(``InvalidOutboxEvent``: no retry changes it), else ``retryable``. ``apply_isolated`` does the
same inside a savepoint: committed on success, rolled back on a handler
failure, left to the enclosing transaction on an infrastructure failure.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy.exc import OperationalError

from app.context import HandlerContext
from app.errors import InfrastructureError, InvalidOutboxEvent, PermanentError, RetryableError
from app.pipeline.apply import HandlerFailed, apply_isolated, run_handlers
from app.pipeline.decode import Decoded, decode
from app.records import RawRecord
from app.registry import HandlerSpec


class FakeSavepoint:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def commit(self) -> None:
        self.log.append("release")

    async def rollback(self) -> None:
        self.log.append("rollback")


class FakeSession:
    """Just enough of ``AsyncSession`` for savepoints: records what happened to them
    (and holds no ORM changes, so nothing is flushed)."""

    new: tuple[object, ...] = ()
    dirty: tuple[object, ...] = ()
    deleted: tuple[object, ...] = ()

    def __init__(self) -> None:
        self.log: list[str] = []

    async def begin_nested(self) -> FakeSavepoint:
        self.log.append("savepoint")
        return FakeSavepoint(self.log)


def item() -> Decoded:
    env = {
        "eventId": "e-1",
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregateType": "Order",
        "aggregateId": "o-1",
        "occurredAt": "2024-05-01T12:00:00Z",
        "data": {"orderId": "o-1", "userId": "u-1", "amount": 1, "paidAt": "2024-05-01T12:00:00Z"},
    }
    result = decode(RawRecord("orders", 0, 0, None, orjson.dumps(env)))
    assert isinstance(result, Decoded)
    return result


def spec(fn: Any, non_retryable: tuple[type[BaseException], ...] = ()) -> HandlerSpec:
    return HandlerSpec("OrderPaid", "points", fn, non_retryable)


def context(session: FakeSession | None = None) -> HandlerContext:
    return HandlerContext(session=session or FakeSession(), consumer="points")  # type: ignore[arg-type]


def recorder(calls: list[tuple[str, str, HandlerContext]], name: str, error: Any = None) -> Any:
    async def fn(event: Any, ctx: HandlerContext) -> None:
        calls.append((name, event.event_id, ctx))
        if error is not None:
            raise error

    fn.__qualname__ = name
    return fn


async def test_handlers_run_in_order_with_the_event_and_the_context() -> None:
    calls: list[tuple[str, str, HandlerContext]] = []
    ctx = context()

    await run_handlers(
        [spec(recorder(calls, "first")), spec(recorder(calls, "second"))], [item()], ctx
    )

    assert calls == [("first", "e-1", ctx), ("second", "e-1", ctx)]


async def test_the_first_failure_stops_the_event_and_carries_its_cause() -> None:
    calls: list[tuple[str, str, HandlerContext]] = []
    cause = ValueError("no such user")
    failing = spec(recorder(calls, "first", cause))

    with pytest.raises(HandlerFailed) as raised:
        await run_handlers([failing, spec(recorder(calls, "second"))], [item()], context())

    assert [name for name, _, _ in calls] == ["first"]
    assert raised.value.spec is failing
    assert raised.value.cause is cause
    # What failed, not the cause's text: that travels only as FAILURE_DETAIL allows.
    assert str(raised.value).endswith(".first") and "no such user" not in str(raised.value)


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("SELECT 1", {}, OSError("unreachable")),
        OperationalError("SELECT 1", {}, TimeoutError()),
        InfrastructureError("redis down"),
    ],
)
async def test_an_infrastructure_failure_becomes_infrastructure_error(error: Exception) -> None:
    with pytest.raises(InfrastructureError) as raised:
        await run_handlers([spec(recorder([], "h", error))], [item()], context())

    assert raised.value.__cause__ is error


def _raised_inside_the_driver() -> Any:
    """A function whose frame belongs to a database driver's module, as asyncpg's would."""
    namespace: dict[str, Any] = {"__name__": "asyncpg.protocol.fake"}
    exec("def execute():\n    raise ConnectionResetError('connection reset')", namespace)
    return namespace["execute"]


async def test_a_handlers_deadline_around_a_statement_that_failed_inside_is_infrastructure() -> (
    None
):
    execute = _raised_inside_the_driver()

    async def bounded(event: Any, ctx: HandlerContext) -> None:
        try:
            execute()
        except ConnectionResetError as exc:
            raise TimeoutError("the statement ran past the handler's deadline") from exc

    with pytest.raises(InfrastructureError):
        await run_handlers([spec(bounded)], [item()], context())


async def test_an_event_no_outbox_row_can_hold_is_a_non_retryable_failure() -> None:
    error = InvalidOutboxEvent("topic 'shop totals' is no Kafka topic name")
    with pytest.raises(HandlerFailed) as raised:
        await run_handlers([spec(recorder([], "h", error))], [item()], context())

    assert raised.value.reason == "non-retryable"


@pytest.mark.parametrize(
    "error", [OSError("unreachable"), TimeoutError(), FileNotFoundError("receipt.html")]
)
async def test_a_handlers_own_oserror_is_its_failure(error: Exception) -> None:
    with pytest.raises(HandlerFailed) as raised:
        await run_handlers([spec(recorder([], "h", error))], [item()], context())
    with pytest.raises(HandlerFailed) as declared:
        await run_handlers([spec(recorder([], "h", error), (OSError,))], [item()], context())

    assert (raised.value.cause, raised.value.reason) == (error, "retryable")
    assert declared.value.reason == "non-retryable"


@pytest.mark.parametrize(
    ("cause", "declared", "reason"),
    [
        (ValueError("x"), (), "retryable"),
        (RetryableError("x"), (), "retryable"),
        (PermanentError("x"), (), "non-retryable"),
        (KeyError("x"), (KeyError,), "non-retryable"),
        (KeyError("x"), (LookupError,), "non-retryable"),
        (KeyError("x"), (ValueError, KeyError), "non-retryable"),
        (LookupError("x"), (KeyError,), "retryable"),
    ],
)
def test_the_failure_reason(
    cause: Exception, declared: tuple[type[BaseException], ...], reason: str
) -> None:
    assert HandlerFailed(spec(recorder([], "h"), declared), cause).reason == reason


async def test_an_isolated_success_releases_its_savepoint() -> None:
    session = FakeSession()

    await apply_isolated([spec(recorder([], "h"))], item(), context(session))

    assert session.log == ["savepoint", "release"]


async def test_an_isolated_handler_failure_rolls_back_its_savepoint() -> None:
    session = FakeSession()

    with pytest.raises(HandlerFailed):
        await apply_isolated([spec(recorder([], "h", ValueError("x")))], item(), context(session))

    assert session.log == ["savepoint", "rollback"]


async def test_an_isolated_infrastructure_failure_leaves_the_savepoint_to_the_transaction() -> None:
    session = FakeSession()

    with pytest.raises(InfrastructureError):
        down = OperationalError("SELECT 1", {}, OSError("x"))
        await apply_isolated([spec(recorder([], "h", down))], item(), context(session))

    assert session.log == ["savepoint"]
