"""Framework tables: ids compared byte for byte on MySQL/MariaDB, and the database's identity.

MySQL and MariaDB compare text by the column's collation, and the default one
(``utf8mb4_general_ci``) ignores case and accents: ``ORDER-A``, ``order-a`` and
``órder-a`` were one aggregate (and one event id) to the database and three to
the worker, which could move an aggregate's version backwards. Every id and
type column of the framework's tables gets ``utf8mb4_bin`` here (one ``ALTER
TABLE`` per table, so each is rebuilt once). Rows that differ only in case or
accents cannot exist yet (the keys were unique case-insensitively), so an
existing database upgrades without conflict. Other databases compare bytes
already and are left alone.

``database_identity`` gets one random id: the Redis prefilter namespaces its
keys by it, so that a fresh database (or one restored and given a new id with
``python -m app.db.migrate --new-identity``) never inherits what Redis remembers
of another.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# table -> (column, length, nullable) of every id and type column.
ID_COLUMNS: dict[str, list[tuple[str, int, bool]]] = {
    "consumed_event": [
        ("event_id", 128, False),
        ("consumer_group", 100, False),
        ("event_type", 100, False),
        ("aggregate_type", 100, False),
        ("aggregate_id", 128, False),
    ],
    "aggregate_version": [
        ("aggregate_id", 128, False),
        ("aggregate_type", 100, False),
        ("consumer_group", 100, False),
    ],
    "parked_event": [
        ("event_id", 128, False),
        ("consumer_group", 100, False),
        ("aggregate_type", 100, False),
        ("aggregate_id", 128, False),
        ("event_type", 100, False),
        ("topic", 249, False),
    ],
    "failed_event": [
        ("consumer_group", 100, False),
        ("topic", 249, False),
        ("event_id", 128, True),
        ("event_type", 100, True),
        ("aggregate_type", 100, True),
        ("aggregate_id", 128, True),
    ],
}


def upgrade() -> None:
    """Binary collation on MySQL/MariaDB; create ``database_identity`` with its one id."""
    _collate("CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    identity = op.create_table(
        "database_identity",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.bulk_insert(identity, [{"id": uuid.uuid4().hex, "created_at": datetime.now(UTC)}])


def downgrade() -> None:
    """Drop ``database_identity``; MySQL/MariaDB columns back to the tables' collation."""
    op.drop_table("database_identity")
    _collate("")


def _collate(clause: str) -> None:
    if op.get_bind().dialect.name != "mysql":
        return
    for table, columns in ID_COLUMNS.items():
        changes = ", ".join(
            f"MODIFY `{name}` VARCHAR({length}) {clause} {'NULL' if nullable else 'NOT NULL'}"
            for name, length, nullable in columns
        )
        op.execute(f"ALTER TABLE `{table}` {changes}")
