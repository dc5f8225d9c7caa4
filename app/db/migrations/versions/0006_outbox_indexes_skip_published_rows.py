"""On PostgreSQL, the outbox's two scan indexes hold only the rows not published.

The relay finds rows to ship through ``ix_outbox_event_status_id`` and checks an
aggregate's earlier rows through ``ix_outbox_event_aggregate``; neither ever looks
for a ``PUBLISHED`` row. ``status`` is a column of both, so marking a row published
wrote an entry into each for a row nobody would look up there again. Both become
partial (``WHERE status <> 'PUBLISHED'``): marking a row published writes neither,
and they stay the size of the backlog, not of the table. The operator's views
(rows per status, dead rows) read ``PENDING``, ``PROCESSING`` and ``DEAD`` rows
only, which both still hold; retention reads published rows in ``id`` order
through the primary key. The indexes are rebuilt in the upgrade's transaction: the
new ones hold the unpublished rows only, so the rebuild takes as long as reading
the table once, and writers to ``outbox_event`` wait for it. MySQL, MariaDB and
SQLite keep their indexes as they are (MySQL has no partial index; SQLite would not
use one for these queries).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# name -> its columns
INDEXES = {
    "ix_outbox_event_status_id": ["status", "id"],
    "ix_outbox_event_aggregate": ["aggregate_type", "aggregate_id", "id"],
}
NOT_PUBLISHED = "status <> 'PUBLISHED'"


def _rebuild(partial: bool) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    where = sa.text(NOT_PUBLISHED) if partial else None
    for name, columns in INDEXES.items():
        op.drop_index(name, table_name="outbox_event")
        op.create_index(name, "outbox_event", columns, postgresql_where=where)


def upgrade() -> None:
    """Make both scan indexes partial on PostgreSQL."""
    _rebuild(partial=True)


def downgrade() -> None:
    """Index every row again."""
    _rebuild(partial=False)
