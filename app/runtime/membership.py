"""A static membership (``GROUP_INSTANCE_ID``) another process shares.

Two workers started with one ``GROUP_INSTANCE_ID`` (a copied manifest, two deployments
of one service) take the membership from each other: the broker hands it to whichever
joined last, the other learns at its next heartbeat that its member id is unknown,
joins again and takes it back, every few seconds, for ever. Both stay up, each holding
the partitions half the time, every batch cut by the next rebalance and run again; the
log shows only aiokafka's ``Heartbeat failed: local member_id was not recognized`` and
handlers failing on rows the other worker wrote meanwhile. ``Membership`` counts those
heartbeats (one now and then is a session that expired: a worker frozen or cut off);
``TAKEN_OVER_TIMES`` of them within ``WINDOW_SECONDS`` fail ``/ready`` on ``membership``,
naming the setting, and log it once as an ERROR.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

from app.monitoring.readiness import Check

NAME = "membership"
TAKEN_OVER_TIMES = 3
WINDOW_SECONDS = 60.0
# aiokafka's words when the broker no longer knows the member (``group_coordinator``).
_COORDINATOR = "aiokafka.consumer.group_coordinator"
_UNKNOWN = "local member_id was not recognized"
log = logging.getLogger("effectively_once.worker")


class Membership(logging.Filter):
    """Counts the heartbeats that found this worker's membership gone (a logging filter on
    aiokafka's coordinator: it lets every record through)."""

    def __init__(self, instance_id: str, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.instance_id = instance_id
        self._clock = clock
        self._lost: deque[float] = deque(maxlen=TAKEN_OVER_TIMES)
        self._said = False

    def watch(self) -> Membership:
        """Start counting (on aiokafka's coordinator logger, whose records are all made,
        whatever the log level: those the level leaves out are counted, then dropped)."""
        coordinator = logging.getLogger(_COORDINATOR)
        coordinator.setLevel(logging.DEBUG)
        coordinator.addFilter(self)
        return self

    def filter(self, record: logging.LogRecord) -> bool:
        self._count(record)
        # Shown only at the level the rest of aiokafka's logging is set to.
        return record.levelno >= logging.getLogger(_COORDINATOR).parent.getEffectiveLevel()  # type: ignore[union-attr]

    def _count(self, record: logging.LogRecord) -> None:
        if _UNKNOWN in record.getMessage():
            self._lost.append(self._clock())
            taken = self._taken_over()
            if taken and not self._said:
                log.error("%s", self.check().detail)
            self._said = taken

    def _taken_over(self) -> bool:
        return (
            len(self._lost) == TAKEN_OVER_TIMES and self._clock() - self._lost[0] <= WINDOW_SECONDS
        )

    def check(self) -> Check:
        """``/ready``'s ``membership``: failed while the membership keeps being taken over."""
        if not self._taken_over():
            return Check(NAME, True, f"GROUP_INSTANCE_ID={self.instance_id}")
        return Check(
            NAME,
            False,
            f"the broker gave this worker's membership (GROUP_INSTANCE_ID={self.instance_id}) "
            f"to another member {TAKEN_OVER_TIMES} times within {WINDOW_SECONDS:.0f}s: another "
            "worker runs with the same GROUP_INSTANCE_ID, and the two take the partitions from "
            "each other; give each replica its own (the pod's name)",
        )
