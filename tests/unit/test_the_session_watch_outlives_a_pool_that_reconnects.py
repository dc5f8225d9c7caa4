"""The session watch keeps probing when the pool's last connection closes and a new one opens.

The watch (``app.db.liveness.SessionWatch``) is one task per engine; it is cancelled when
the pool's last watched connection closes, and started again by the next connection. When
every session was terminated at once (a failover, ``pg_terminate_backend``) and a
consumer's new connection came in before the cancellation had landed, that connection saw
a watch still running, started none, and the watch then ended: no connection of that
worker was probed again. In the chaos soak a worker so left then waited out its whole
response deadline (35 s) on a connection abandoned 8 s later, and the group's rebalance
waited with it (36 to 63 s without progress).

Contract: a connection made while the watch is being cancelled is watched by a new one,
which probes it once it has waited ``probe_after`` seconds.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.db import liveness
from app.db.liveness import SessionWatch
from app.db.timeouts import DEFAULT_TIMEOUTS

WAITED = 60.0  # far beyond ``probe_after``


class Transport:
    def is_closing(self) -> bool:
        return False


class Waiting(liveness._Connection):
    """A connection whose statement has waited ``WAITED`` seconds for an answer."""

    def silent_for(self, now: float) -> tuple[float, bool]:
        return WAITED, True


class Watch(SessionWatch):
    """The watch with its probe recorded instead of sent to a server."""

    def __init__(self) -> None:
        super().__init__(
            "postgresql+asyncpg://probe@127.0.0.1:1/db", "postgresql", DEFAULT_TIMEOUTS
        )
        self.probed: asyncio.Queue[set[int]] = asyncio.Queue()

    async def _probe(self, waiting: dict[int, tuple[float, bool]]) -> None:
        self.probed.put_nowait({self._connections[key].session for key in waiting})

    def connect(self, dbapi_connection: Any, session: int) -> None:
        """What ``connected`` does once it found the connection's session."""
        self._connections[id(dbapi_connection)] = Waiting(session, Transport(), None)
        self._keep_watching()


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liveness, "LOOK_EVERY_SECONDS", 0.05)


async def test_a_connection_made_while_the_watch_is_cancelled_is_probed() -> None:
    watch = Watch()
    first, second = object(), object()
    watch.connect(first, 101)
    assert await asyncio.wait_for(watch.probed.get(), 5) == {101}

    watch.closed(first, None)  # the pool's last connection: the watch is cancelled
    watch.connect(second, 102)  # in before the cancellation landed

    assert await asyncio.wait_for(watch.probed.get(), 5) == {102}
    watch.closed(second, None)


async def test_the_watch_ends_with_the_pools_last_connection() -> None:
    watch = Watch()
    only = object()
    watch.connect(only, 201)
    await asyncio.wait_for(watch.probed.get(), 5)
    task = watch._task
    assert task is not None

    watch.closed(only, None)

    with pytest.raises(asyncio.CancelledError):
        await task
