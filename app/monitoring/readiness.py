"""``/ready``: may this worker be sent traffic? Each check answers within a second or fails.

Ready means: the database answers ``SELECT 1``, a broker accepts a connection with
the worker's own settings (TLS and login included),
the consumer has partitions assigned (one in the middle of a rebalance is
alive but not ready; one beyond the partition count, after the group settled,
is a ready spare), the in-worker relay runs and its cycles end (a worker without one,
``RELAY_ENABLED=false``: no outbox row has waited past ``RELAY_STALL_SECONDS``), and batches
complete: a worker that has completed none for ``READY_STALL_SECONDS`` while
records wait is stuck (a connection that hangs, a pause that lasts), not ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import or_, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import outbox_event
from app.outbox.status import OutboxStatus
from app.outbox.written import write_time, written_at
from app.scrub import said, scrub

CHECK_TIMEOUT_SECONDS = 1.0


class Connects(Protocol):
    """Connects to a bootstrap server as the worker's clients do (``KafkaClients``)."""

    async def check(self, within: float) -> str:
        """The server that took the connection; raises why none did."""
        ...


@dataclass(frozen=True, slots=True)
class Check:
    """One named check and what it found."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Readiness:
    """All checks; ready only if every one passed."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(check.ok for check in self.checks)

    def body(self) -> dict[str, Any]:
        """The JSON body of ``/ready``: status, failed check names, and each check's detail."""
        return {
            "status": "ready" if self.ok else "not ready",
            "failed": [check.name for check in self.checks if not check.ok],
            "checks": {
                check.name: {"ok": check.ok, "detail": check.detail} for check in self.checks
            },
        }


async def database(engine: AsyncEngine, within: float = CHECK_TIMEOUT_SECONDS) -> Check:
    """The database answers ``SELECT 1`` within ``within`` seconds. A pooled connection
    found lost on the way (a connection used a moment ago is not pinged first: see
    ``app.db.ping``) is asked again on a new one, so that the detail says what a new
    connection meets (the database is gone, refuses, is unreachable)."""

    async def select_one() -> None:
        try:
            await _select_one(engine)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            await _select_one(engine)

    try:
        async with asyncio.timeout(within):
            await select_one()
    except TimeoutError:
        return Check("database", False, f"no answer to SELECT 1 within {within}s{_at(engine)}")
    except Exception as exc:
        return Check("database", False, f"{said(exc)}{_at(engine)}")
    return Check("database", True, "SELECT 1 answered")


def _at(engine: AsyncEngine) -> str:
    """`` (at host:port)`` of ``engine``'s server, where it has one: a driver's error may
    not name it (``gaierror: Name or service not known``)."""
    url = engine.url
    if not url.host:
        return ""
    return f" (at {url.host}:{url.port})" if url.port else f" (at {url.host})"


async def _select_one(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


async def broker(clients: Connects, within: float = CHECK_TIMEOUT_SECONDS) -> Check:
    """A bootstrap server takes a connection (TCP, then TLS and the login the settings ask
    for) within ``within`` seconds per server."""
    try:
        server = await clients.check(within)
    except Exception as exc:
        return Check("broker", False, scrub(str(exc)) or type(exc).__name__)
    return Check("broker", True, f"{server} accepts connections")


async def outbox(engine: AsyncEngine, limit: float, within: float = CHECK_TIMEOUT_SECONDS) -> Check:
    """No due outbox row has waited more than ``limit`` seconds: for a worker with no relay of
    its own (``RELAY_ENABLED=false``), whose retry and dead-letter records, and the events
    its handlers emit, another process must ship."""
    t = outbox_event
    now = datetime.now(UTC)
    oldest = (
        select(written_at(t))
        .where(
            t.c.status == OutboxStatus.PENDING.value,
            or_(t.c.next_retry_at.is_(None), t.c.next_retry_at <= now),
        )
        .order_by(t.c.id)
        .limit(1)
    )
    try:
        async with asyncio.timeout(within), engine.connect() as conn:
            created = write_time(await conn.scalar(oldest))
    except Exception as exc:
        return Check("outbox", False, f"cannot read the outbox: {said(exc)}")
    if created is None:
        return Check("outbox", True, "no row waits for a relay")
    age = (now - created).total_seconds()
    if age > limit:
        return Check(
            "outbox",
            False,
            f"an outbox row has waited {age:.0f}s for a relay (RELAY_ENABLED=false here: "
            "is a relay running on this database?)",
        )
    return Check("outbox", True, f"the oldest row waiting for a relay is {age:.0f}s old")


def partitions(assigned: int | None, settled: bool = False, missing: Sequence[str] = ()) -> Check:
    """The consumer has ``assigned`` partitions (``None``: the consumer is not running).

    ``settled``: the group finished a rebalance and none is under way. A member with no
    partitions then is a spare (more replicas than partitions): ready, waiting to take
    over, not broken; before its first assignment or while the group rebalances it is not.
    ``missing``: topics the worker consumes that the broker's metadata lacks (deleted
    under it, a broker that lost its data): not ready, whatever is assigned, since no
    member can be given their partitions (every member had none, and called itself a
    spare).
    """
    if assigned is None:
        return Check("partitions", False, "the consumer has not started")
    if missing:
        named = ", ".join(repr(topic) for topic in missing)
        return Check(
            "partitions",
            False,
            f"the broker has no topic {named}: the worker creates its topics at start only "
            "(TOPICS_DECLARE); create them, or restart the worker",
        )
    if assigned == 0 and settled:
        return Check(
            "partitions", True, "none assigned: a spare member (more members than partitions)"
        )
    if assigned == 0:
        return Check("partitions", False, "no partitions assigned")
    return Check("partitions", True, f"{assigned} assigned")


def progress(
    waiting: int | None, stalled: float, since_last: float, limit: float, completed_any: bool
) -> Check:
    """Batches complete: records do not wait more than ``limit`` seconds without one
    completing (``stalled``: ``Progress.stalled_for``; ``waiting`` ``None``: lag unknown,
    nothing to judge by). ``since_last``: seconds since the last batch completed, or since
    the start until one did (``completed_any``), and the detail says which."""
    if waiting is None:
        return Check("progress", True, "lag unknown")
    is_stalled = bool(waiting) and stalled > limit
    if not completed_any:
        since = f"no batch yet in the {since_last:.0f}s since the start"
        detail = (
            f"{since} while {waiting} record(s) wait"
            if is_stalled
            else f"{since}, {waiting} record(s) waiting"
        )
    elif is_stalled:
        detail = (
            f"no batch completed for {since_last:.0f}s while {waiting} record(s) wait "
            f"({stalled:.0f}s since a batch started or nothing waited)"
        )
    else:
        detail = f"last batch {since_last:.0f}s ago, {waiting} record(s) waiting"
    return Check("progress", not is_stalled, detail)
