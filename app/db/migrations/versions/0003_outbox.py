"""The transactional outbox (``outbox_event``), and an index for dedup retention.

Mirrors ``app/db/tables.py`` as it was when written. ``outbox_event`` is a contract
for producers in any language: a row inserted with plain SQL (``event_id``,
``aggregate_type``, ``aggregate_id``, ``event_type``, ``topic``, ``payload``) gets
its status, retry count and timestamps from the server's defaults, in UTC.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

MYSQL = ("mysql", "mariadb")


def _id(length: int) -> sa.types.TypeEngine[str]:
    binary = mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin")
    return sa.String(length).with_variant(binary, *MYSQL)


LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), *MYSQL)
LONG_BYTES = sa.LargeBinary().with_variant(mysql.MEDIUMBLOB(), *MYSQL)
WHEN = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *MYSQL)


def _now(dialect: str) -> sa.TextClause:
    """The server's current time in UTC, as a column default."""
    if dialect in MYSQL:
        # CURRENT_TIMESTAMP would be the session's time zone; the relay reads UTC.
        return sa.text("(UTC_TIMESTAMP(6))")
    if dialect == "postgresql":
        return sa.text("now()")
    return sa.text("CURRENT_TIMESTAMP")  # SQLite: UTC


def upgrade() -> None:
    """Create ``outbox_event`` with its indexes; index ``consumed_event.applied_at``."""
    dialect = op.get_bind().dialect.name
    now = _now(dialect)
    op.create_table(
        "outbox_event",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("event_id", _id(64), nullable=False),
        sa.Column("aggregate_type", _id(100), nullable=False),
        sa.Column("aggregate_id", _id(64), nullable=False),
        sa.Column("event_type", sa.String(128), nullable=False),
        sa.Column("topic", _id(128), nullable=False),
        sa.Column("event_key", _id(128), nullable=True),
        sa.Column("payload", LONG_TEXT, nullable=False),
        sa.Column("headers", LONG_TEXT, nullable=True),
        sa.Column("aggregate_version", sa.Integer, nullable=True),
        sa.Column("status", sa.String(16), nullable=False, server_default="PENDING"),
        sa.Column("retry_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_retry_at", WHEN, nullable=True),
        sa.Column("created_at", WHEN, nullable=False, server_default=now),
        sa.Column("published_at", WHEN, nullable=True),
        sa.Column("updated_at", WHEN, nullable=False, server_default=now),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_expires_at", WHEN, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("record_key", LONG_BYTES, nullable=True),
        sa.Column("record_value", LONG_BYTES, nullable=True),
        sa.Column("record_headers", LONG_TEXT, nullable=True),
        sa.UniqueConstraint("event_id", name="uq_outbox_event_event_id"),
    )
    op.create_index("ix_outbox_event_status_id", "outbox_event", ["status", "id"])
    op.create_index(
        "ix_outbox_event_aggregate", "outbox_event", ["aggregate_type", "aggregate_id", "id"]
    )
    op.create_index(
        "ix_consumed_event_applied_at",
        "consumed_event",
        ["applied_at"],
        postgresql_using="brin",
    )


def downgrade() -> None:
    """Drop ``outbox_event`` (and every unshipped event in it) and the retention index."""
    op.drop_index("ix_consumed_event_applied_at", table_name="consumed_event")
    op.drop_index("ix_outbox_event_aggregate", table_name="outbox_event")
    op.drop_index("ix_outbox_event_status_id", table_name="outbox_event")
    op.drop_table("outbox_event")
