"""A claim's lease, kept for as long as its cycle runs, and the proof a relay holds a row.

A relay may wait a long time inside one cycle: for the broker's metadata, for
acknowledgements, between retries of a refused send, in the search for a dead
relay's records. ``Lease.keep`` renews the claim every third of the lease whatever
the relay is waiting on, and learns which rows another relay took over after an
expiry. Invariant: a record is handed to the producer only while ``holds`` its row:
the last renewal that succeeded started less than the lease (less a margin for the
relays' clocks) ago, and found the row still this relay's. A relay that cannot prove
it sends nothing more of that claim, so it never repeats a row after a later row of
the same aggregate that another relay published meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.outbox import settle

# The share of the lease not relied on: another relay's clock may run ahead of ours.
MARGIN = 0.2
log = logging.getLogger("effectively_once.relay")


class Lease:
    """This relay's lease on the rows of one claim, taken at ``taken`` (monotonic)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        owner: str,
        ids: Sequence[int],
        seconds: float,
        clock: Callable[[], datetime],
        taken: float,
    ) -> None:
        self._sessions = sessions
        self._owner = owner
        self._ids = list(ids)
        self._seconds = seconds
        self._clock = clock
        self._renewed = taken
        self.lost: set[int] = set()

    @property
    def valid(self) -> bool:
        """Whether the last renewal that succeeded is recent enough to rely on."""
        return time.monotonic() < self._renewed + self._seconds * (1 - MARGIN)

    def holds(self, row_id: int) -> bool:
        """Whether this relay may still send the record of ``row_id``."""
        return self.valid and row_id not in self.lost

    async def renew(self) -> None:
        """Extend the lease on the rows still held; note the ones another relay took."""
        started = time.monotonic()
        now = self._clock()
        until = now + timedelta(seconds=self._seconds)
        live = [row_id for row_id in self._ids if row_id not in self.lost]
        async with self._sessions() as session, session.begin():
            count = await settle.renew(session, self._owner, live, until, now)
            if count < len(live):
                still = await settle.held(session, self._owner, live)
                taken = set(live) - still
                self.lost |= taken
                log.warning(
                    "%d of %d claimed row(s) are no longer this relay's (taken over by another "
                    "relay after the lease expired, or given up by an operator): this relay "
                    "sends none of them, nor their aggregates' later rows",
                    len(taken),
                    len(live),
                )
        self._renewed = started

    async def keep(self) -> None:
        """Renew every third of the lease until cancelled; a failed renewal is retried at
        the next turn (meanwhile ``valid`` runs out, and nothing more is sent)."""
        while True:
            await asyncio.sleep(self._seconds / 3)
            try:
                await self.renew()
            except Exception as exc:
                log.warning("could not renew the lease on %d row(s): %r", len(self._ids), exc)
