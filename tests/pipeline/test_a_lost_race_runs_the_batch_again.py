"""A deadlock or serialization failure runs the consumer's batch again; it is no outage.

Contract: when the database rolls a consumer's transaction back to let another commit
(PostgreSQL's ``40P01`` deadlock or ``40001`` serialization failure, MySQL's and
MariaDB's 1213 and 1020), whether in a handler's statement or the framework's, the batch
runs again at once: one INFO line, counted as a ``conflict`` rerun, no pause (``on_pause``
is not told, no ERROR line), and its effects apply once. Two replicas' handlers locking
rows in different orders meet this in normal operation. A lock wait that timed out
(``55P03``, MySQL's 1205) is still a pause: whoever holds the lock may hold it again. A
handler's own exception that merely carries such a number is no race.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError, OperationalError

from app import metrics
from app.context import HandlerContext
from app.errors import InfrastructureError
from app.pipeline.classify import lost_a_race
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import MakeProcessor, kinds, write_effect


class PgError(Exception):
    """A driver's error with PostgreSQL's SQLSTATE, as asyncpg's carry it."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def pg(sqlstate: str, message: str) -> DBAPIError:
    return OperationalError("UPDATE user_points", {}, PgError(sqlstate, message))


def mysql(number: int, message: str) -> DBAPIError:
    return OperationalError("UPDATE user_points", {}, Exception(number, message))


@pytest.mark.parametrize(
    ("error", "race"),
    [
        (lambda: pg("40P01", "deadlock detected"), True),
        (lambda: pg("40001", "could not serialize access"), True),
        (lambda: mysql(1213, "Deadlock found when trying to get lock"), True),
        (lambda: mysql(1020, "Record has changed since last read"), True),
        (lambda: pg("55P03", "could not obtain lock"), False),
        (lambda: mysql(1205, "Lock wait timeout exceeded"), False),
        (lambda: pg("08006", "connection failure"), False),
        (lambda: ValueError(1213, "a handler's own"), False),
    ],
)
def test_what_counts_as_a_lost_race(error: Callable[[], BaseException], race: bool) -> None:
    assert lost_a_race(error()) is race
    # As a handler's failure reaches the processor: wrapped, the driver's error its cause.
    try:
        try:
            raise error()
        except Exception as exc:
            raise InfrastructureError(f"handlers.points.award: {exc}") from exc
    except InfrastructureError as wrapped:
        assert lost_a_race(wrapped) is race


def rerun_conflicts() -> float:
    value = metrics.BATCH_RERUNS.labels(consumer="points", reason="conflict")._value.get()
    return float(value)


async def test_a_deadlock_in_a_handler_runs_the_batch_again_without_a_pause(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised = [pg("40P01", "deadlock detected")]
    calls: list[str] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)
        await write_effect(event, ctx)
        if raised:
            raise raised.pop()

    pauses: list[Any] = []
    before = rerun_conflicts()
    with caplog.at_level(logging.INFO):
        outcomes = await make_processor(on_pause=lambda *told: pauses.append(told)).process(
            [records.event("e1")]
        )

    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert calls == ["e1", "e1"]
    assert pauses == []
    assert rerun_conflicts() == before + 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("lost a race" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)


async def test_a_lock_wait_that_timed_out_is_still_a_pause(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    raised = [pg("55P03", "could not obtain lock on row")]

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        if raised:
            raise raised.pop()

    pauses: list[Any] = []
    outcomes = await make_processor(on_pause=lambda *told: pauses.append(told)).process(
        [records.event("e1")]
    )

    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert len(pauses) == 1
