"""Pause and retry in place: how the pipeline meets an infrastructure failure.

The batch is not the event's fault when the database, Redis or the broker is
down, so it is neither routed nor acked: the same work is retried, with
exponential back-off, until it succeeds or the worker stops. The pauses are
spread (jitter), so that workers paused by one outage do not all come back at
the same moment.

A paused batch that stops being this worker's (``holds``: a rebalance, or the worker
stopping) is given up (``BatchGivenUp``) between its attempts, within a quarter of a
second: faust waits for every batch it delivered before it lets a rebalance or a stop go
on, and an outage would hold either until the dependency came back. So is an attempt
still running ``CUT_AFTER_SECONDS`` after the batch stopped being the worker's: one that
waits on a connection gone silent would otherwise hold the stop until the driver's
deadlines end it (the response deadline and a new connection's: 45 s by default, past
an orchestrator's grace). It is cancelled: its transaction never commits, or committed
as the cut came (its effects and dedup records together). The attempt that failed or was
cut rolled back; the batch's consumers that committed before are found applied when its
partitions' next owner reads it again (``run_batches`` acks nothing behind it).
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from app.db.said import remedy
from app.errors import BatchGivenUp
from app.pipeline import wake
from app.pipeline.classify import Fault, fault_of, is_infrastructure, signature
from app.pipeline.together import CutShort, unless_cut

T = TypeVar("T")
log = logging.getLogger("effectively_once.pause")

Sleep = Callable[[float], Awaitable[None]]
# What a failure without a message means: the driver gave up waiting (``app.db.timeouts``).
_SILENT: dict[type[BaseException], str] = {TimeoutError: "no answer within the deadline"}
OnPause = Callable[[str, BaseException, float], None]
Holds = Callable[[], bool]
# How long a paused batch that is no longer this worker's may go on holding a rebalance.
CHECK_EVERY_SECONDS = 0.25
# How long an attempt may run on once its batch is no longer this worker's (a healthy one
# ends well within it: nothing is cut for nothing).
CUT_AFTER_SECONDS = 2.0


# Beyond 2**64 times ``initial`` every delay is ``maximum`` anyway; an uncapped exponent
# made ``2 ** (attempt - 1)`` too large for a float at attempt 1,025 (8.5 hours of 30 s pauses).
_MAX_DOUBLINGS = 64


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off between ``initial`` and ``maximum`` seconds, less up to
    ``jitter`` of it drawn from ``random`` (injected, so tests choose the draws)."""

    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.5
    random: Callable[[], float] = field(default=_random.random, compare=False, repr=False)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (attempts count from 1)."""
        doubled = self.initial * 2.0 ** min(max(attempt - 1, 0), _MAX_DOUBLINGS)
        return min(self.maximum, doubled) * (1.0 - self.jitter * self.random())


@dataclass
class Streak:
    """How many times in a row a step failed on the same statement the database cancelled.

    A retry gets past a connection that came back or a race that was lost; it may
    never get past a statement the server cancels every time (its statement timeout),
    so the step that keeps meeting one is escalated (see the processor). Any other
    failure ends the streak.
    """

    failures: int = 0
    last: tuple[str, str] | None = None

    def note(self, exc: BaseException) -> None:
        """``exc`` made the step fail once more."""
        same = signature(exc) if fault_of(exc) is Fault.STATEMENT else None
        if same is None:
            self.failures = 0
        elif same == self.last:
            self.failures += 1
        else:
            self.failures = 1
        self.last = same


async def retry_in_place(
    what: str,
    operation: Callable[[], Awaitable[T]],
    backoff: Backoff,
    sleep: Sleep = asyncio.sleep,
    on_pause: OnPause | None = None,
    streak: Streak | None = None,
    holds: Holds | None = None,
) -> T:
    """Run ``operation`` until it succeeds, pausing on infrastructure failures (each noted in
    ``streak``, which ``operation`` may read); ``BatchGivenUp`` once ``holds()`` is false
    after a failure or during a pause.

    Any other exception propagates: it is a bug or the event's fault, not a pause.
    """
    attempt = 0
    while True:
        try:
            result = await (operation() if holds is None else _while_held(what, operation, holds))
        except Exception as exc:
            if not is_infrastructure(exc):
                raise
            if streak is not None:
                streak.note(exc)
            attempt += 1
            delay = backoff.delay(attempt)
            hint = remedy(exc)
            log.error(
                "infrastructure failure during %s (attempt %d), pausing %.1fs and retrying "
                "in place; offsets will not move: %s: %s%s",
                what,
                attempt,
                delay,
                type(exc).__name__,
                _text(exc) or _SILENT.get(type(exc), "(no message)"),
                f" ({hint})" if hint else "",
            )
            if on_pause is not None:
                on_pause(what, exc, delay)
            if holds is None:
                await sleep(delay)
            else:
                woken = partial(wake.since, wake.mark())
                await sleep_while_held(delay, holds, partial(_lost, what), sleep, woken=woken)
        else:
            if attempt:
                # Done, not necessarily applied: an escalated batch routes the event it blames.
                log.warning("%s done after %d paused attempt(s)", what, attempt)
            return result


def _text(exc: BaseException) -> str:
    """The text of ``exc`` without SQLAlchemy's line pointing to its documentation (a record
    of two lines for each pause)."""
    lines = str(exc).splitlines()
    return "\n".join(line for line in lines if not line.startswith(_BACKGROUND)).strip()


_BACKGROUND = "(Background on this error at:"


async def _while_held(what: str, operation: Callable[[], Awaitable[T]], holds: Holds) -> T:
    """One attempt of ``operation``, asking ``holds()`` every ``CHECK_EVERY_SECONDS`` while it
    runs; cancelled, and ``BatchGivenUp``, once it was false for ``CUT_AFTER_SECONDS``. Not
    waited for once cancelled: what it winds down (a rollback on a silent connection) ends
    at the driver's deadlines, in the background."""
    try:
        return await unless_cut(
            operation(), _lost_for(holds, CUT_AFTER_SECONDS), CHECK_EVERY_SECONDS
        )
    except CutShort:
        raise BatchGivenUp(
            f"{what} was still running {CUT_AFTER_SECONDS:g} s after it stopped being "
            "this worker's (a rebalance, or the worker stopping): cut short"
        ) from None


def _lost_for(holds: Holds, seconds: float) -> Callable[[], bool]:
    """True once ``holds()`` has been false for ``seconds`` (asked again each time)."""
    since: float | None = None

    def lost() -> bool:
        nonlocal since
        if holds():
            since = None
            return False
        since = since if since is not None else time.monotonic()
        return time.monotonic() - since >= seconds

    return lost


async def sleep_while_held(
    seconds: float,
    holds: Holds,
    given_up: Callable[[float], str],
    sleep: Sleep = asyncio.sleep,
    woken: Callable[[], bool] = lambda: False,
) -> None:
    """Sleep ``seconds``, asking ``holds()`` every ``CHECK_EVERY_SECONDS`` and once more at
    the end; ``BatchGivenUp(given_up(seconds left))`` as soon as it is false. Ends early
    once ``woken()`` (a dependency answers again: ``app.pipeline.wake``)."""
    until = time.monotonic() + seconds
    while True:
        left = until - time.monotonic()
        if not holds():
            raise BatchGivenUp(given_up(max(left, 0.0)))
        if left <= 0 or woken():
            return
        await sleep(min(left, CHECK_EVERY_SECONDS))


def _lost(what: str, _left: float) -> str:
    return (
        f"{what} paused on an infrastructure failure and is no longer this worker's "
        "(a rebalance, or the worker stopping)"
    )
