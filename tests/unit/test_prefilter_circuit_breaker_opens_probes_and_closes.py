"""The circuit breaker stops asking a dead Redis, and asks again after a cool-down.

Contract: closed, it allows every call; ``failure_threshold`` consecutive
failures (a success resets the count) open it. Open, it allows nothing until
``cooldown_seconds`` have passed on its clock; then it is half-open and allows
exactly one probe at a time. The probe's success closes it; its failure opens
it again for a fresh cool-down; a cancelled probe lets the next call probe.
Reports from calls that started before it opened change nothing. Every state
change is logged once and reported to ``on_state_change``; a failing observer
does not break the caller.
"""

from __future__ import annotations

import logging

import pytest

from app.prefilter.breaker import Circuit, CircuitBreaker

THRESHOLD = 3
COOLDOWN = 30.0


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def changes() -> list[tuple[Circuit, Circuit]]:
    return []


@pytest.fixture
def breaker(clock: FrozenClock, changes: list[tuple[Circuit, Circuit]]) -> CircuitBreaker:
    return CircuitBreaker(THRESHOLD, COOLDOWN, clock, lambda old, new: changes.append((old, new)))


def fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        assert breaker.allow()
        breaker.failed("ConnectionError()")


def open_breaker(breaker: CircuitBreaker) -> None:
    fail(breaker, THRESHOLD)
    assert breaker.state is Circuit.OPEN


def test_it_opens_after_threshold_consecutive_failures(breaker: CircuitBreaker) -> None:
    fail(breaker, THRESHOLD - 1)
    assert breaker.state is Circuit.CLOSED and breaker.allow()
    breaker.failed("ConnectionError()")

    assert breaker.state is Circuit.OPEN and breaker.is_open
    assert not breaker.allow()


def test_a_success_resets_the_count(breaker: CircuitBreaker) -> None:
    fail(breaker, THRESHOLD - 1)
    assert breaker.allow()
    breaker.succeeded()
    fail(breaker, THRESHOLD - 1)

    assert breaker.state is Circuit.CLOSED


@pytest.mark.parametrize(
    ("elapsed", "allowed", "state"),
    [
        (0.0, False, Circuit.OPEN),
        (COOLDOWN - 0.001, False, Circuit.OPEN),
        (COOLDOWN, True, Circuit.HALF_OPEN),
        (COOLDOWN * 10, True, Circuit.HALF_OPEN),
    ],
)
def test_open_it_waits_for_the_cooldown_then_probes(
    breaker: CircuitBreaker, clock: FrozenClock, elapsed: float, allowed: bool, state: Circuit
) -> None:
    open_breaker(breaker)
    clock.advance(elapsed)

    assert breaker.allow() is allowed
    assert breaker.state is state


def test_half_open_allows_one_probe_at_a_time(breaker: CircuitBreaker, clock: FrozenClock) -> None:
    open_breaker(breaker)
    clock.advance(COOLDOWN)

    assert breaker.allow()
    assert not breaker.allow()  # the probe is still in flight
    assert not breaker.allow()


def test_an_abandoned_probe_frees_the_slot(breaker: CircuitBreaker, clock: FrozenClock) -> None:
    open_breaker(breaker)
    clock.advance(COOLDOWN)
    assert breaker.allow()
    breaker.abandoned()  # the probe was cancelled: no verdict

    assert breaker.state is Circuit.HALF_OPEN
    assert breaker.allow()


def test_a_successful_probe_closes_it(
    breaker: CircuitBreaker, clock: FrozenClock, changes: list[tuple[Circuit, Circuit]]
) -> None:
    open_breaker(breaker)
    clock.advance(COOLDOWN)
    assert breaker.allow()
    breaker.succeeded()

    assert breaker.state is Circuit.CLOSED and not breaker.is_open
    assert all(breaker.allow() for _ in range(5))
    assert changes == [
        (Circuit.CLOSED, Circuit.OPEN),
        (Circuit.OPEN, Circuit.HALF_OPEN),
        (Circuit.HALF_OPEN, Circuit.CLOSED),
    ]


def test_a_failed_probe_opens_it_for_a_fresh_cooldown(
    breaker: CircuitBreaker, clock: FrozenClock
) -> None:
    open_breaker(breaker)
    clock.advance(COOLDOWN)
    assert breaker.allow()
    breaker.failed("TimeoutError()")

    assert breaker.state is Circuit.OPEN
    clock.advance(COOLDOWN - 0.001)
    assert not breaker.allow()
    clock.advance(0.001)
    assert breaker.allow() and breaker.state is Circuit.HALF_OPEN


def test_after_closing_it_needs_threshold_failures_again(
    breaker: CircuitBreaker, clock: FrozenClock
) -> None:
    open_breaker(breaker)
    clock.advance(COOLDOWN)
    assert breaker.allow()
    breaker.succeeded()

    fail(breaker, THRESHOLD - 1)
    assert breaker.state is Circuit.CLOSED


def test_late_reports_from_before_it_opened_change_nothing(
    breaker: CircuitBreaker, clock: FrozenClock
) -> None:
    assert breaker.allow()  # a slow call starts while closed ...
    open_breaker(breaker)
    breaker.succeeded()  # ... and succeeds after the circuit opened
    assert breaker.state is Circuit.OPEN
    breaker.failed("late")  # a late failure does not extend the cool-down either
    clock.advance(COOLDOWN)
    assert breaker.allow()


def test_each_state_change_is_logged_once(
    breaker: CircuitBreaker, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="effectively_once.prefilter")
    open_breaker(breaker)
    for _ in range(50):  # many batches while open: no log line each
        assert not breaker.allow()
    clock.advance(COOLDOWN)
    assert breaker.allow()
    breaker.succeeded()

    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "closed -> open" in lines[0] and "ConnectionError()" in lines[0]
    assert caplog.records[0].levelno == logging.WARNING
    assert "open -> half-open" in lines[1]
    assert "half-open -> closed" in lines[2]


def test_a_failing_observer_does_not_break_the_breaker(clock: FrozenClock) -> None:
    def broken(old: Circuit, new: Circuit) -> None:
        raise RuntimeError("metrics exploded")

    breaker = CircuitBreaker(1, COOLDOWN, clock, broken)
    assert breaker.allow()
    breaker.failed("x")

    assert breaker.state is Circuit.OPEN


@pytest.mark.parametrize(("threshold", "cooldown"), [(0, 1.0), (1, -1.0)])
def test_nonsense_settings_are_refused(threshold: int, cooldown: float) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(threshold, cooldown)
