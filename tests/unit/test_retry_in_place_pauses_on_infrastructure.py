"""An infrastructure failure pauses and retries the same work in place, with back-off.

Contract: ``retry_in_place`` runs the operation until it returns and returns
its result. After each infrastructure failure it tells ``on_pause`` (what,
the exception, the delay) and sleeps ``Backoff.delay(attempt)``: ``initial``
doubling per attempt, capped at ``maximum`` (less the jitter, off here; see
``test_backoff_is_capped_and_spread``). Any other exception, and
cancellation, propagates at once without sleeping or retrying.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import OperationalError

from app.pipeline.pause import Backoff, retry_in_place


class FakeSleep:
    """Records the delays instead of waiting them out (the frozen clock of these tests)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Flaky:
    """Raises the given exceptions in turn, then returns ``result``."""

    def __init__(self, *failures: BaseException, result: str = "done") -> None:
        self.failures = list(failures)
        self.calls = 0
        self.result = result

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.result


@pytest.mark.parametrize(
    ("attempt", "delay"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (6, 16.0), (7, 30.0), (50, 30.0)]
)
def test_backoff_doubles_from_initial_up_to_maximum(attempt: int, delay: float) -> None:
    assert Backoff(initial=0.5, maximum=30.0, jitter=0.0).delay(attempt) == delay


def test_backoff_defaults() -> None:
    assert Backoff() == Backoff(initial=0.5, maximum=30.0, jitter=0.5)


async def test_success_first_time_returns_the_result_without_sleeping() -> None:
    sleep, operation = FakeSleep(), Flaky(result="ok")

    result = await retry_in_place("work", operation, Backoff(), sleep=sleep)

    assert result == "ok"
    assert operation.calls == 1
    assert sleep.delays == []


async def test_infrastructure_failures_are_retried_with_growing_pauses() -> None:
    sleep = FakeSleep()
    operation = Flaky(
        ConnectionRefusedError("refused"),
        OperationalError("SELECT 1", {}, Exception("locked")),
        TimeoutError("slow"),
    )
    pauses: list[tuple[str, type[BaseException], float]] = []

    result = await retry_in_place(
        "batch of 3 for points",
        operation,
        Backoff(initial=1.0, maximum=3.0, jitter=0.0),
        sleep=sleep,
        on_pause=lambda what, exc, delay: pauses.append((what, type(exc), delay)),
    )

    assert result == "done"
    assert operation.calls == 4
    assert sleep.delays == [1.0, 2.0, 3.0]
    assert pauses == [
        ("batch of 3 for points", ConnectionRefusedError, 1.0),
        ("batch of 3 for points", OperationalError, 2.0),
        ("batch of 3 for points", TimeoutError, 3.0),
    ]


@pytest.mark.parametrize("error", [ValueError("bad"), KeyError("k"), RuntimeError("bug")])
async def test_any_other_exception_propagates_at_once(error: Exception) -> None:
    sleep, operation = FakeSleep(), Flaky(error)
    pauses: list[str] = []

    with pytest.raises(type(error)):
        await retry_in_place(
            "work", operation, Backoff(), sleep=sleep, on_pause=lambda w, e, d: pauses.append(w)
        )

    assert operation.calls == 1
    assert sleep.delays == []
    assert pauses == []


async def test_a_non_infrastructure_failure_after_pauses_still_propagates() -> None:
    sleep, operation = FakeSleep(), Flaky(OSError("down"), ValueError("bad"))

    with pytest.raises(ValueError, match="bad"):
        await retry_in_place("work", operation, Backoff(initial=0.25, jitter=0.0), sleep=sleep)

    assert operation.calls == 2
    assert sleep.delays == [0.25]


async def test_cancellation_is_not_retried() -> None:
    sleep, operation = FakeSleep(), Flaky(asyncio.CancelledError())

    with pytest.raises(asyncio.CancelledError):
        await retry_in_place("work", operation, Backoff(), sleep=sleep)

    assert operation.calls == 1
    assert sleep.delays == []


def test_a_pause_is_one_line_without_sqlalchemys_documentation_link(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pause's line leaves out SQLAlchemy's ``(Background on this error at: ...)``, which
    made a refused connection's pause two lines."""
    failure = OperationalError("SELECT 1", {}, ConnectionRefusedError("refused"))
    assert "Background on this error" in str(failure)

    asyncio.run(retry_in_place("reading", Flaky(failure), Backoff(jitter=0.0), FakeSleep()))

    (record,) = [r for r in caplog.records if "infrastructure failure" in r.getMessage()]
    assert "Background on this error" not in record.getMessage()
