"""Read one event's story out of the framework's tables.

Each consumer leaves at most a few rows per event: ``consumed_event`` (applied),
``parked_event`` (waiting for an earlier version), ``failed_event`` (in a retry
tier, dead-lettered, skipped, resolved...). A stale event leaves no row; it is
recognised by its aggregate's version being already at or past the event's,
which needs the aggregate, learnt from another consumer's row.

The outbox tells the rest: the event's own row, when this database's service
wrote it (pending, published when, dead and why), and the rows of its retry and
dead-letter records (filed under the event's id).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, Table, and_, literal_column, or_, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import (
    aggregate_version,
    consumed_event,
    failed_event,
    outbox_event,
    parked_event,
)
from app.outbox.status import RECORD_AGGREGATE_TYPE
from dlq.blocking import OpenFailure, open_failures
from schemas.ids import id_spellings


@dataclass(frozen=True, slots=True)
class Finding:
    """One consumer's state for the event (``consumer`` ``""``: poison, no consumer's)."""

    consumer: str
    state: str
    at: datetime | None = None
    detail: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """An outbox row of the event: the event itself, or one of its retry or DLT records."""

    id: int
    kind: str  # "event", "retry", "dead-letter"
    status: str
    topic: str
    created_at: datetime | None
    published_at: datetime | None
    retry_count: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class Trace:
    """Everything the database knows about one eventId."""

    event_id: str
    event_type: str | None = None
    aggregate_type: str | None = None
    aggregate_id: str | None = None
    version: int | None = None
    findings: tuple[Finding, ...] = ()
    outbox: tuple[OutboxRow, ...] = ()

    @property
    def found(self) -> bool:
        """True when some table has a row for the event."""
        return bool(self.outbox) or any(f.state not in ("stale", "not seen") for f in self.findings)


# Whether a consumer (first) runs a handler of an event type (second), as registered now.
Handles = Callable[[str, str], bool]


async def trace_event(
    conn: AsyncConnection,
    event_id: str,
    consumers: Sequence[str] | None = None,
    handles: Handles | None = None,
) -> Trace:
    """The event's findings for every consumer (``consumers``: the registered ones, if known,
    which lets the lookups use the tables' primary keys). ``handles``, where the handlers are
    known: a registered consumer's dedup record of a type it has no handler of is shown as
    its version taken, not as applied.

    ``event_id`` as a person types it: ``100001`` and ``"100001"`` both find the event a
    producer sent with ``"eventId": 100001`` or ``"eventId": "100001"`` (stored as the
    text ``100001``).
    """
    spellings = id_spellings(event_id)
    for spelling in spellings[:-1]:
        found = await _trace(conn, spelling, consumers, handles)
        if found.found:
            return found
    return await _trace(conn, spellings[-1], consumers, handles)


async def _trace(
    conn: AsyncConnection,
    event_id: str,
    consumers: Sequence[str] | None,
    handles: Handles | None,
) -> Trace:
    consumed = await _rows(conn, consumed_event, event_id, consumers)
    parked = await _rows(conn, parked_event, event_id, consumers)
    # Read with * so that columns the failure handling adds or renames never break tracing.
    failed_query: Select[Any] = (
        select(literal_column("*"))
        .select_from(failed_event)
        .where(failed_event.c.event_id == event_id)
    )
    failed = [dict(row) for row in (await conn.execute(failed_query)).mappings()]
    outbox = await _outbox(conn, event_id)
    known = next(iter([*consumed, *parked, *failed]), None)
    if known is None:
        own = next((row for row in outbox if row[1].kind == "event"), None)
        if own is None:
            return Trace(event_id, outbox=tuple(row for _, row in outbox))
        return Trace(event_id, outbox=tuple(row for _, row in outbox), **own[0])
    event = {key: known.get(key) for key in ("event_type", "aggregate_type", "aggregate_id")}
    version = known.get("aggregate_version")
    recorded = {r["consumer_group"] for r in [*consumed, *parked, *failed]}
    # Poison never reached a consumer: no "not seen" lines for them.
    names = sorted(recorded if recorded == {""} else set(consumers or ()) | recorded)
    versions = await _versions(conn, event, [n for n in names if n])
    findings: list[Finding] = []
    for name in names:
        last = versions.get(name)
        mine = [_failure(row) for row in failed if row["consumer_group"] == name]
        # An operator's skip for this consumer (of its failure, or of poison: nobody's row)
        # took the version without running a handler: its dedup record is no application.
        skipped = any(
            row.get("status") == "skipped" for row in failed if row["consumer_group"] in (name, "")
        )
        runs = handles if name in (consumers or ()) else None
        mine += [_consumed(row, skipped, runs) for row in consumed if row["consumer_group"] == name]
        for row in parked:
            if row["consumer_group"] == name:
                blocker = await _blocker(conn, row, (last or 0) + 1)
                mine.append(_parked(row, last, blocker))
        if not mine:
            mine = [_unrecorded(name, version, last)]
        findings.extend(mine)
    return Trace(
        event_id,
        version=version,
        findings=tuple(findings),
        outbox=tuple(row for _, row in outbox),
        **event,
    )


async def _outbox(conn: AsyncConnection, event_id: str) -> list[tuple[dict[str, Any], OutboxRow]]:
    """The event's own outbox row and its records' rows, oldest first, each with what it
    says of the event; none on a schema without the outbox."""
    t = outbox_event
    query = (
        select(t)
        .where(
            or_(
                t.c.event_id == event_id,
                and_(t.c.aggregate_type == RECORD_AGGREGATE_TYPE, t.c.aggregate_id == event_id),
            )
        )
        .order_by(t.c.id)
    )
    try:
        async with conn.begin_nested():
            found = (await conn.execute(query)).mappings().all()
    except DBAPIError:  # no outbox_event table (yet)
        return []
    return [
        (
            {
                "event_type": row["event_type"],
                "aggregate_type": row["aggregate_type"],
                "aggregate_id": row["aggregate_id"],
                "version": row["aggregate_version"],
            },
            OutboxRow(
                row["id"],
                "event" if row["event_id"] == event_id else row["event_type"],
                row["status"],
                row["topic"],
                _moment(row["created_at"]),
                _moment(row["published_at"]),
                row["retry_count"],
                row["last_error"],
            ),
        )
        for row in found
    ]


async def _rows(
    conn: AsyncConnection, table: Table, event_id: str, consumers: Sequence[str] | None
) -> list[dict[str, Any]]:
    query = select(table).where(table.c.event_id == event_id)
    if consumers:
        query = query.where(table.c.consumer_group.in_(list(consumers)))
    return [dict(row) for row in (await conn.execute(query)).mappings()]


async def _versions(
    conn: AsyncConnection, event: Mapping[str, Any], consumers: list[str]
) -> dict[str, int | None]:
    if not consumers or event["aggregate_id"] is None:
        return {}
    t = aggregate_version
    query = select(t.c.consumer_group, t.c.last_version).where(
        t.c.consumer_group.in_(consumers),
        t.c.aggregate_type == event["aggregate_type"],
        t.c.aggregate_id == event["aggregate_id"],
    )
    return {consumer: last for consumer, last in await conn.execute(query)}


def _consumed(row: Mapping[str, Any], skipped: bool, handles: Handles | None) -> Finding:
    """A dedup record: an operator's skip (``skipped``), a type the consumer has no handler
    of (where ``handles`` knows), or an application."""
    if skipped:
        return _taken(row)
    if (
        handles is not None
        and row["event_type"]
        and not handles(row["consumer_group"], row["event_type"])
    ):
        return _passed(row)
    return _applied(row)


def _applied(row: Mapping[str, Any]) -> Finding:
    version = row["aggregate_version"]
    detail = f"version {version} applied" if version is not None else "applied (unversioned)"
    return Finding(row["consumer_group"], "applied", _moment(row["applied_at"]), detail)


def _taken(row: Mapping[str, Any]) -> Finding:
    return _version_taken(row, "skipped", " by an operator's skip, its handlers not run")


def _passed(row: Mapping[str, Any]) -> Finding:
    why = f"; no handler of {row['event_type']} registered for this consumer"
    return _version_taken(row, "no handler", why)


def _version_taken(row: Mapping[str, Any], state: str, why: str) -> Finding:
    """A dedup record that applied nothing: ``version N taken`` and ``why``."""
    version = row["aggregate_version"]
    what = f"version {version} taken" if version is not None else "taken"
    return Finding(row["consumer_group"], state, _moment(row["applied_at"]), what + why)


async def _blocker(
    conn: AsyncConnection, row: Mapping[str, Any], waiting_for: int
) -> OpenFailure | None:
    """The failure of ``waiting_for``, the version ``row`` (parked) waits for, if it failed."""
    found = await open_failures(
        conn, row["consumer_group"], row["aggregate_type"], row["aggregate_id"], [waiting_for]
    )
    return found.get(waiting_for)


def _parked(row: Mapping[str, Any], last: int | None, blocker: OpenFailure | None) -> Finding:
    waiting_for = (last or 0) + 1
    if blocker is not None:
        why = f", which {blocker.describe(row['consumer_group'])}"
    else:
        why = (
            " (never sent? python -m dlq release --consumer "
            f"{row['consumer_group']} --aggregate {row['aggregate_type']}:{row['aggregate_id']})"
        )
    return Finding(
        row["consumer_group"],
        "parked",
        _moment(row["parked_at"]),
        f"version {row['aggregate_version']} waits for version {waiting_for}{why}",
        {"waiting_for_version": waiting_for, "last_applied_version": last},
    )


# failed_event columns shown in --json (those a given schema version lacks are left out).
_FAILURE_FIELDS = (
    *("reason", "attempts", "topic", "partition", "offset", "exception_type"),
    *("exception_message", "first_failed_at", "last_failed_at", "decided_by", "decision_note"),
)


def _failure(row: Mapping[str, Any]) -> Finding:
    status = row.get("status") or ("poison" if not row["consumer_group"] else "failed")
    attempts = row.get("attempts")
    parts = [f"reason {row.get('reason')}"]
    if attempts is not None:
        parts.append(f"{attempts} attempt(s)")
    message = str(row.get("exception_message") or "").strip().splitlines()
    if row.get("exception_type"):
        parts.append(f"{row['exception_type']}: {message[0][:160] if message else ''}".strip())
    at = _moment(row.get("last_failed_at") or row.get("failed_at"))
    fields = {
        key: _moment(row[key]) if key.endswith("_at") else row[key]
        for key in _FAILURE_FIELDS
        if row.get(key) is not None
    }
    return Finding(row["consumer_group"], status, at, "; ".join(parts), fields)


def _unrecorded(consumer: str, version: int | None, last: int | None) -> Finding:
    if version is not None and last is not None and last >= version:
        return Finding(
            consumer,
            "stale",
            None,
            f"no row; the aggregate is at version {last} >= {version} (skipped as stale)",
            {"last_applied_version": last},
        )
    return Finding(consumer, "not seen", None, "no row yet: not consumed, or still in flight")


def _moment(value: Any) -> datetime | None:
    """A stored timestamp as an aware UTC datetime (SQLite and MySQL keep no zone, and
    ``failed_event`` is read untyped, so it may come back as text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        return None
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
