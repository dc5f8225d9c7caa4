"""Ping a pooled connection before handing it out only when it sat idle in the pool.

SQLAlchemy's ``pool_pre_ping`` pings every connection at every checkout. On asyncpg a
ping is three round trips (``BEGIN``, ``;``, ``ROLLBACK``): on a busy worker, where the
same connection goes back to the pool and out again within milliseconds, that was three
of the twenty or so statements of each consumer's batch, and of each relay claim and
settle, each answered with nothing to learn.

Here a connection is pinged at checkout only once it sat in the pool ``IDLE_SECONDS``
or longer: what ends connections (a database restart or failover, an idle timeout, a
NAT entry that expired) strikes the ones that wait in the pool, and the pool's users
then never meet a dead one after a quiet spell. One that went back to the pool a moment
ago answered its last statement then. If it died in between (the database went down that
very moment), its first statement fails as a lost connection: SQLAlchemy invalidates it
and the pool's older ones, and the batch or the relay's cycle pauses and runs again on a
new connection, as it does for a connection lost during a transaction.

A ping that fails, or raises, invalidates the connection and every older one in the pool
(``InvalidatePoolError``: whatever ended it ended them too); the pool then hands out a new
connection, as the pre-ping does. A new connection is never pinged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import AsyncEngine

IDLE_SECONDS = 1.0
_IDLE_SINCE = "effectively_once.idle_since"


def ping_when_idle(
    engine: AsyncEngine, idle: float = IDLE_SECONDS, clock: Callable[[], float] = time.monotonic
) -> None:
    """Ping each of ``engine``'s pooled connections at checkout once it sat idle ``idle``
    seconds or longer (instead of ``pool_pre_ping``, which pings at every checkout)."""
    dialect = engine.sync_engine.dialect

    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info[_IDLE_SINCE] = clock()

    def checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        # ``info`` belongs to the driver's connection: a new one has no mark, and is not pinged.
        since = record.info.pop(_IDLE_SINCE, None)
        if since is None or clock() - since < idle:
            return
        try:
            alive = dialect.do_ping(dbapi_connection)  # looked up now: ``liveness`` wraps it
        except Exception as error:
            why = f"the pooled connection's ping failed: {error!r}"
            raise exc.InvalidatePoolError(why) from error
        if not alive:
            raise exc.InvalidatePoolError("the pooled connection did not answer its ping")

    event.listen(engine.sync_engine, "checkin", checked_in)
    event.listen(engine.sync_engine, "checkout", checked_out)
