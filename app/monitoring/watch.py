"""The database and the broker watched between batches: an outage is said at once.

A batch meets an outage only when it sends something: a worker waiting for records
meets a broker that went silent in nothing it does (the client reconnects quietly), and
a statement sent into a silent database connection fails only at its deadline. So every
``WATCH_EVERY_SECONDS`` the worker asks each dependency what ``/ready`` asks it
(``SELECT 1``; the broker's metadata over the kept connection) and, on the first
failure, logs one ERROR line naming it and why, counts a pause for it and holds
``effectively_once_paused`` at 1 (``app.monitoring.pauses``), adding the watch's seconds
to its pause seconds while it lasts; every ``REMIND_EVERY_SECONDS`` it says again that
the dependency is still down; once it answers, one line says after how long, and the
batches paused meanwhile try again at once rather than at the end of their back-off
(``app.pipeline.wake``). Batches pause and retry in place as they meet the outage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from app import metrics
from app.monitoring import pauses
from app.monitoring.readiness import Check
from app.pipeline import wake

log = logging.getLogger("effectively_once.watch")

WATCH_EVERY_SECONDS = 5.0
REMIND_EVERY_SECONDS = 60.0


@dataclass
class Watch:
    """One dependency's watch: ``check`` says whether it answers (a readiness check)."""

    dependency: str
    check: Callable[[], Awaitable[Check]]
    every: float = WATCH_EVERY_SECONDS
    clock: Callable[[], float] = time.monotonic
    down_since: float | None = None
    said_at: float = 0.0
    answered_at: float | None = None  # the last round it answered

    async def once(self) -> None:
        """Ask once; say, count and mark what changed."""
        found = await self.check()
        now = self.clock()
        if found.ok:
            if self.down_since is not None:
                since = self.down_since if self.answered_at is None else self.answered_at
                log.warning(
                    "the %s answers again; its last answer before was %.0f s ago: %s",
                    self.dependency,
                    now - since,
                    found.detail,
                )
                self.down_since = None
                pauses.answers(self.dependency)
                wake.answered()  # the batches paused on it try again now
            self.answered_at = now
            return
        if self.down_since is None:
            self.down_since = self.said_at = now
            metrics.record_pause(self.dependency, self.every)
            pauses.unreachable(self.dependency)
            log.error(
                "the %s does not answer (%s): the worker waits for it, retrying in place; "
                "no offset moves past what was committed",
                self.dependency,
                found.detail,
            )
            return
        metrics.record_unreachable(self.dependency, self.every)
        if now - self.said_at >= REMIND_EVERY_SECONDS:
            self.said_at = now
            log.error(
                "the %s has not answered for %.0f s (%s): the worker still waits for it",
                self.dependency,
                now - self.down_since,
                found.detail,
            )


async def keep_watching(watches: Sequence[Watch]) -> None:
    """Run each of ``watches`` every ``Watch.every`` seconds (the least of theirs, as its
    pause seconds count them), for ever (a task of the worker)."""
    every = min(watch.every for watch in watches)
    while True:
        for watch, outcome in zip(
            watches,
            await asyncio.gather(*(w.once() for w in watches), return_exceptions=True),
            strict=True,
        ):
            if isinstance(outcome, Exception):  # a check never raises; a bug must not stop it
                log.warning("the %s watch failed: %r", watch.dependency, outcome)
        await asyncio.sleep(every)
