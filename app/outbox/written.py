"""When an outbox row was written: its ``created_at``, read as the databases store it.

SQLite and MySQL keep no zone (we write UTC); SQLite may hand an aggregate's time back as
text. A producer's zero value is no write time: Go's ``time.Time{}`` (year 1), Java's
``new Timestamp(0)`` (1970), MySQL's ``0000-00-00`` under a relaxed ``sql_mode`` (handed
back as text). Such a row is published like any other; it only has no age.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Table, case

# A ``created_at`` before this is a producer's zero value, not when the row was written.
WRITTEN_SINCE = datetime(2000, 1, 1, tzinfo=UTC)


def aware(moment: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite and MySQL keep no zone; we write UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def write_time(value: object) -> datetime | None:
    """``created_at`` as an aware datetime, or None when it cannot be when its row was
    written (before ``WRITTEN_SINCE``, or text that is no time)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    moment = aware(value)
    return moment if moment >= WRITTEN_SINCE else None


def written_at(outbox: Table) -> ColumnElement[datetime]:
    """SQL for when a row of ``outbox`` was written: ``created_at``, else (a producer's
    zero value) ``updated_at``, else NULL: a row that waits ages from its last change
    rather than from year 1, or not at all."""
    since = WRITTEN_SINCE
    return case(
        (outbox.c.created_at >= since, outbox.c.created_at),
        (outbox.c.updated_at >= since, outbox.c.updated_at),
        else_=None,
    )
