"""aiokafka's repeated lines during an outage: one per message every ``EVERY_SECONDS``.

With its broker down, a worker's aiokafka client logs each failed connection, metadata
update and fetch: about 60 ERROR lines a second (916 in 15 s), the same few messages
over and over, which bury the worker's own one line per try. ``Repeats`` lets the first
WARNING or ERROR record of each message (its logger and format string) through, leaves
out the same message for ``EVERY_SECONDS``, and the next one that passes says how many it
left out. Nothing is lost that says something new: a different message passes at once,
and INFO records (each rebalance's assignment) always do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

EVERY_SECONDS = 10.0
PREFIX = "aiokafka"


class Repeats(logging.Filter):
    """Passes one record per (logger, message) each ``every`` seconds."""

    def __init__(self, every: float = EVERY_SECONDS, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self._every = every
        self._clock = clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a repeat within the interval; the record that ends one counts them.
        INFO and below always pass (a rebalance's assignment, which repeats, is one)."""
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, str(record.msg))
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self._every:
            self._seen[key] = (seen[0], seen[1] + 1)
            return False
        self._seen[key] = (now, 0)
        if seen is not None and seen[1]:
            record.msg = f"{record.msg} ({seen[1]} more like it left out in {now - seen[0]:.0f}s)"
        return True


def quiet_repeats(*_: object, **__: object) -> None:
    """Put one ``Repeats`` on every aiokafka logger (a receiver of faust's
    ``on_worker_init``; aiokafka's modules are imported by then). Idempotent."""
    repeats = Repeats()
    loggers = [logging.getLogger(PREFIX)] + [
        logging.getLogger(name)
        for name in list(logging.root.manager.loggerDict)
        if name.startswith(f"{PREFIX}.")
    ]
    for logger in loggers:
        if not any(isinstance(f, Repeats) for f in logger.filters):
            logger.addFilter(repeats)
