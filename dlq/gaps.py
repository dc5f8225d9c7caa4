"""``release``: give up the versions a consumer's parked events wait for, which never came.

A consumer applies an aggregate's version ``last + 1`` only; later ones park until it
comes. When the producer never sent it (lost, or written out of the outbox by hand),
nothing closes the gap: the operator gives the missing versions up. For each, this
publishes a *skip record* to the partition the parked events came from, as ``dlq skip``
does for a dead event: the named consumer takes that version without running a
handler, and its parked successors then apply in order. Nothing is written to the
database here; the worker does that, in its own transaction, like any skip.

A missing version that was sent and failed (dead in the DLT, in a retry tier, or poison)
is refused, naming the command that settles it (``blocking``): skipped here, its
failure would stay open, its dead-letter alert firing and its record replayable.

Each skip record is an envelope of event type ``VersionGivenUp`` whose ``eventId`` is
derived from the consumer, the aggregate and the version: releasing twice publishes the
same event again, which the consumer's dedup absorbs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from rich.console import Console
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import aggregate_version, parked_event
from dlq.blocking import open_failures
from dlq.broker import replayer
from dlq.commands import Target
from dlq.errors import CommandError, NothingMatched
from dlq.records import OutRecord
from dlq.skip_record import Aggregate, Release
from dlq.skip_record import skip_record as given_up
from dlq.status import failure_store


@dataclass(frozen=True, slots=True)
class Gap:
    """The versions ``consumer`` waits for before its parked events of one aggregate."""

    consumer: str
    aggregate_type: str
    aggregate_id: str
    last_applied: int | None
    first_parked: int
    parked: int
    topic: str
    partition: int
    key: bytes | None

    @property
    def missing(self) -> list[int]:
        """The versions between the last applied and the first parked (none applied: 1)."""
        return list(range((self.last_applied or 0) + 1, self.first_parked))


async def find_gap(
    engine: AsyncEngine, consumer: str, aggregate_type: str, aggregate_id: str
) -> Gap:
    """The gap before ``consumer``'s parked events of the aggregate; ``NothingMatched``
    when it has none parked."""
    p, v = parked_event, aggregate_version
    mine = (
        p.c.consumer_group == consumer,
        p.c.aggregate_type == aggregate_type,
        p.c.aggregate_id == aggregate_id,
    )
    async with engine.connect() as conn:
        first = (
            await conn.execute(
                select(p.c.aggregate_version, p.c.topic, p.c.partition, p.c.record_key)
                .where(*mine)
                .order_by(p.c.aggregate_version)
                .limit(1)
            )
        ).first()
        if first is None:
            raise NothingMatched(
                f"{consumer} has no parked event of {aggregate_type}:{aggregate_id}: "
                "nothing waits for a version"
            )
        parked = (await conn.execute(select(func.count()).where(*mine))).scalar_one()
        last = (
            await conn.execute(
                select(v.c.last_version).where(
                    v.c.consumer_group == consumer,
                    v.c.aggregate_type == aggregate_type,
                    v.c.aggregate_id == aggregate_id,
                )
            )
        ).scalar_one_or_none()
    version, topic, partition, key = first
    return Gap(consumer, aggregate_type, aggregate_id, last, version, parked, topic, partition, key)


def skip_record(
    gap: Gap, version: int, now: datetime, release: Release, app_id: str | None = None
) -> OutRecord:
    """The record that makes ``gap.consumer`` (of the deployment ``app_id``) take ``version``
    without a handler (``dlq.skip_record``)."""
    where = Aggregate(
        gap.consumer, gap.aggregate_type, gap.aggregate_id, gap.topic, gap.partition, gap.key
    )
    return given_up(where, version, now, release, app_id)


async def release(
    target: Target,
    consumer: str,
    aggregate: tuple[str, str],
    execute: bool,
    out: Console,
    decision: Release,
) -> None:
    """Print the versions ``consumer`` waits for before its parked events of ``aggregate``;
    with ``execute``, publish a skip record for each (saying ``decision``'s who and why)."""
    async with failure_store(target.database_url) as store:
        if await store.unknown_consumers([consumer]):
            raise CommandError(
                f"--consumer {consumer!r}: no consumer of that name ever took a version, "
                "applied or failed an event in this database (mistyped?)"
            )
        gap = await find_gap(store.engine, consumer, *aggregate)
        async with store.engine.connect() as conn:
            failed = await open_failures(conn, consumer, *aggregate, gap.missing)
    name = f"{gap.aggregate_type}:{gap.aggregate_id}"
    last = "none" if gap.last_applied is None else str(gap.last_applied)
    out.print(
        f"{consumer}, {name}: last applied version {last}, {gap.parked} parked from version "
        f"{gap.first_parked} ({gap.topic} partition {gap.partition})"
    )
    if not gap.missing:
        out.print("no version is missing: the parked events apply with the aggregate's next batch")
        return
    if failed:
        # Sent and failed, not lost: skipping them here would leave their failures open.
        for version, failure in sorted(failed.items()):
            out.print(f"version {version} {failure.describe(consumer)}")
        raise CommandError(
            f"version(s) {', '.join(map(str, sorted(failed)))} were sent and failed: see "
            "above; release gives up only versions that never came"
        )
    versions = ", ".join(map(str, gap.missing))
    if not execute:
        out.print(f"would give up version(s) {versions}; add --execute to do it")
        return
    now = datetime.now(UTC)
    given_up: list[str] = []
    async with replayer(target.clients) as sender:
        for version in gap.missing:
            try:
                record = skip_record(gap, version, now, decision, target.app_id)
                partition, offset = await sender.send(record, gap.partition)
            except Exception as exc:  # the broker's refusal, or a partition it no longer has
                done = ", ".join(given_up) or "none"
                raise CommandError(
                    f"publishing the skip record of version {version} to {gap.topic} partition "
                    f"{gap.partition} failed (version(s) given up before it: {done}): {exc!r}"
                ) from exc
            given_up.append(str(version))
            out.print(f"version {version}: skip record published at {partition}:{offset}")
    why = f" ({decision.why})" if decision.why else ""
    out.print(
        f"gave up version(s) {versions} as {decision.by}{why}: {consumer} takes them and "
        "applies its parked events"
    )


def unnamed_release(consumer: str) -> str:
    """What a release without ``APP_ID`` publishes: skip records no deployment is named on."""
    return (
        f"note: APP_ID is not set: the skip records name no deployment, so every service's "
        f"consumer {consumer!r} reading this topic takes them (set APP_ID to the service's "
        "where several services read the topic)"
    )
