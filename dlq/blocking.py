"""The failures that hold a consumer's parked events back: a missing version that is dead.

A consumer's parked events of an aggregate wait for the version after its last applied
one. When that version failed (its event dead in the DLT, or on its way through a retry
tier, or poison whose envelope names it), it was sent: the operator replays it once the
cause is fixed, or skips it (``dlq skip``, which also settles its failure row), and
``dlq release``, which is for versions never sent, is the wrong tool. ``open_failures``
finds such failures; ``trace`` and ``release`` name them and the command that fits.
``waiting_on`` finds the consumers a version holds back: poison a skip settled for some
consumers still holds the others, and ``dlq list`` shows it dead for them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import aggregate_version, failed_event, parked_event
from dlq.dead import SETTLED, FailureStatus


@dataclass(frozen=True, slots=True)
class OpenFailure:
    """A failure of one of an aggregate's versions, not settled: for ``consumer`` (``""``:
    poison, nobody's)."""

    consumer: str
    version: int
    event_id: str | None
    status: str
    reason: str

    def remedy(self, waiting: str) -> str:
        """The commands that settle it for ``waiting`` (the consumer whose events wait); for
        an event still on its way through the retry tiers, that it needs none yet."""
        if self.status == FailureStatus.RETRYING and self.consumer:
            follow = f": python -m app trace {self.event_id}" if self.event_id else ""
            return (
                "it comes back from its retry tier by itself, and goes to the DLT if its "
                f"last tier fails too; nothing to replay or skip before that{follow}"
            )
        if self.event_id is None:
            return "python -m dlq list, then replay or skip it by its position"
        named = f"--event-id {self.event_id}"
        alone = f" --for-consumer {waiting}" if not self.consumer else ""
        return f"python -m dlq replay {named} once fixed, or python -m dlq skip {named}{alone}"

    def describe(self, waiting: str) -> str:
        """How it failed and what settles it, in one line."""
        whose = f"poison, {self.reason}" if not self.consumer else f"{self.status}, {self.reason}"
        event = f"event {self.event_id}" if self.event_id else "its event"
        return f"failed ({event}: {whose}): {self.remedy(waiting)}"


async def open_failures(
    conn: AsyncConnection,
    consumer: str,
    aggregate_type: str,
    aggregate_id: str,
    versions: Collection[int],
) -> dict[int, OpenFailure]:
    """The failures of ``versions`` (the versions ``consumer`` misses) of the aggregate that
    still hold them: ``consumer``'s own not settled, and poison's whatever its row says
    (a skip another consumer took settles the row, not this consumer's gap), by version
    (the consumer's own first)."""
    if not versions:
        return {}
    t = failed_event
    query = select(
        t.c.consumer_group, t.c.aggregate_version, t.c.event_id, t.c.status, t.c.reason
    ).where(
        or_(
            and_(
                t.c.consumer_group == consumer,
                t.c.status.not_in([status.value for status in SETTLED]),
            ),
            t.c.consumer_group == "",
        ),
        t.c.aggregate_type == aggregate_type,
        t.c.aggregate_id == aggregate_id,
        t.c.aggregate_version.in_(sorted(versions)),
    )
    found: dict[int, OpenFailure] = {}
    for owner, version, event_id, status, reason in await conn.execute(query):
        if version not in found or owner:
            found[version] = OpenFailure(owner, version, event_id, status, reason)
    return found


async def waiting_on(
    conn: AsyncConnection, aggregate_type: str, aggregate_id: str, version: int
) -> list[str]:
    """The consumers whose parked events of the aggregate wait for ``version``: their last
    applied version is below it (or none) and they parked a later one. For poison a skip
    settled for some consumers: the others still wait, and the record is theirs to act on."""
    p, v = parked_event, aggregate_version
    last = (
        select(v.c.last_version)
        .where(
            v.c.consumer_group == p.c.consumer_group,
            v.c.aggregate_type == aggregate_type,
            v.c.aggregate_id == aggregate_id,
        )
        .scalar_subquery()
    )
    query = (
        select(p.c.consumer_group)
        .where(
            p.c.aggregate_type == aggregate_type,
            p.c.aggregate_id == aggregate_id,
            p.c.aggregate_version > version,
            func.coalesce(last, 0) < version,
        )
        .distinct()
        .order_by(p.c.consumer_group)
    )
    return list((await conn.execute(query)).scalars())
