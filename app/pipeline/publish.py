"""Publishing retry and dead-letter records: the pipeline's only write to the broker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dlq.records import OutRecord


class Publisher(Protocol):
    """Sends records and returns only once the broker has acknowledged every one."""

    async def publish(self, records: Sequence[OutRecord]) -> None:
        """Send ``records``; raise if any was not acknowledged."""
        ...


class NoPublisher:
    """For a processor that must never route (tests of the happy path); raises if asked."""

    async def publish(self, records: Sequence[OutRecord]) -> None:
        """Refuse: nothing may be routed without a broker."""
        if records:
            raise RuntimeError(f"no publisher configured, cannot route {len(records)} record(s)")
