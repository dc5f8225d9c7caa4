"""A circuit breaker, so that a dead Redis is not asked on every batch.

::

    closed ──(failure_threshold consecutive failures)──> open
    open ──(cooldown_seconds later, the next call)──> half-open: that one call is the probe
    half-open ──(probe succeeds)──> closed
    half-open ──(probe fails)──> open (the cool-down starts again)

While open, and while a half-open probe is in flight, ``allow()`` says no and the
caller takes the path that does not need Redis. Time comes from an injected clock.
Each state change is logged once and reported to ``on_state_change``; nothing is
logged per call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger("effectively_once.prefilter")

Clock = Callable[[], float]


class Circuit(StrEnum):
    """The breaker's states, as they appear in logs."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


OnStateChange = Callable[[Circuit, Circuit], None]
"""Called with ``(old, new)`` on every state change (e.g. to set a gauge)."""


@dataclass
class CircuitBreaker:
    """Counts consecutive failures of a dependency and stops calling it for a while."""

    failure_threshold: int
    cooldown_seconds: float
    clock: Clock = time.monotonic
    on_state_change: OnStateChange | None = None
    name: str = "Redis prefilter"
    state: Circuit = Circuit.CLOSED
    _failures: int = 0
    _opened_at: float = 0.0
    _probing: bool = False

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, not {self.failure_threshold}")
        if self.cooldown_seconds < 0:
            raise ValueError(f"cooldown_seconds must be >= 0, not {self.cooldown_seconds}")

    @property
    def is_open(self) -> bool:
        """True unless closed: Redis is not (or only by a probe) being asked."""
        return self.state is not Circuit.CLOSED

    def allow(self) -> bool:
        """May the caller use the dependency now? A yes must be followed by one report:
        ``succeeded``, ``failed`` or ``abandoned``."""
        if self.state is Circuit.CLOSED:
            return True
        if self.state is Circuit.OPEN:
            if self.clock() - self._opened_at < self.cooldown_seconds:
                return False
            self._move(Circuit.HALF_OPEN, "cool-down over, the next call probes")
        if self._probing:
            return False
        self._probing = True
        return True

    def succeeded(self) -> None:
        """Report that an allowed call worked."""
        self._failures = 0
        if self.state is Circuit.HALF_OPEN:
            self._probing = False
            self._move(Circuit.CLOSED, "the probe succeeded")
        # A success reported while open came from a call started before the circuit
        # opened; it proves little, so the circuit waits for its own probe.

    def failed(self, error: str) -> None:
        """Report that an allowed call failed (``error`` is named in the log when it opens)."""
        if self.state is Circuit.HALF_OPEN:
            self._probing = False
            self._open(f"the probe failed: {error}")
        elif self.state is Circuit.CLOSED:
            self._failures += 1
            if self._failures >= self.failure_threshold:
                self._open(f"{self._failures} consecutive failures, the last: {error}")

    def abandoned(self) -> None:
        """Report that an allowed call ended without an answer (it was cancelled).

        Counts as neither success nor failure, but frees the half-open probe slot,
        or the circuit would wait for a probe that never reports.
        """
        if self.state is Circuit.HALF_OPEN:
            self._probing = False

    def _open(self, why: str) -> None:
        self._opened_at = self.clock()
        self._failures = 0
        self._move(Circuit.OPEN, f"{why}; not asked again for {self.cooldown_seconds:g} s")

    def _move(self, new: Circuit, why: str) -> None:
        old, self.state = self.state, new
        level = logging.WARNING if new is Circuit.OPEN and old is Circuit.CLOSED else logging.INFO
        log.log(level, "%s circuit %s -> %s: %s", self.name, old, new, why)
        if self.on_state_change is not None:
            try:
                self.on_state_change(old, new)
            except Exception:  # a broken observer must not break the caller's fallback
                log.exception("%s: on_state_change callback failed", self.name)
