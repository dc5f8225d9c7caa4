"""Framework tables: dedup records, aggregate versions, parked and failed events.

Mirrors ``app/db/tables.py`` as it was when written; a later change to those
tables needs a new revision, not an edit here.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

CONSUMER = sa.String(100)
EVENT_ID = sa.String(128)
AGG_TYPE = sa.String(100)
AGG_ID = sa.String(128)
EVENT_TYPE = sa.String(100)
TOPIC = sa.String(249)
WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the four framework tables and their indexes."""
    op.create_table(
        "consumed_event",
        # The selective column leads every key: lookups are `event_id IN (...)`, and
        # PostgreSQL keeps using the index then even on statistics from a smaller table.
        sa.Column("event_id", EVENT_ID, primary_key=True),
        sa.Column("consumer_group", CONSUMER, primary_key=True),
        sa.Column("event_type", EVENT_TYPE, nullable=False),
        sa.Column("aggregate_type", AGG_TYPE, nullable=False),
        sa.Column("aggregate_id", AGG_ID, nullable=False),
        sa.Column("aggregate_version", sa.Integer, nullable=True),
        sa.Column("applied_at", WHEN, nullable=False),
    )
    op.create_table(
        "aggregate_version",
        sa.Column("aggregate_id", AGG_ID, primary_key=True),
        sa.Column("aggregate_type", AGG_TYPE, primary_key=True),
        sa.Column("consumer_group", CONSUMER, primary_key=True),
        sa.Column("last_version", sa.Integer, nullable=True),
        sa.Column("updated_at", WHEN, nullable=False),
    )
    op.create_table(
        "parked_event",
        sa.Column("event_id", EVENT_ID, primary_key=True),
        sa.Column("consumer_group", CONSUMER, primary_key=True),
        sa.Column("aggregate_type", AGG_TYPE, nullable=False),
        sa.Column("aggregate_id", AGG_ID, nullable=False),
        sa.Column("aggregate_version", sa.Integer, nullable=False),
        sa.Column("event_type", EVENT_TYPE, nullable=False),
        sa.Column("topic", TOPIC, nullable=False),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("offset", sa.BigInteger, nullable=False),
        sa.Column("record_key", sa.LargeBinary, nullable=True),
        sa.Column("record_value", sa.LargeBinary, nullable=False),
        sa.Column("record_headers", sa.Text, nullable=False),
        sa.Column("parked_at", WHEN, nullable=False),
    )
    op.create_index(
        "ix_parked_event_aggregate",
        "parked_event",
        ["aggregate_id", "aggregate_type", "consumer_group"],
    )
    op.create_table(
        "failed_event",
        sa.Column("consumer_group", CONSUMER, primary_key=True),
        sa.Column("topic", TOPIC, primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("offset", sa.BigInteger, primary_key=True),
        sa.Column("event_id", EVENT_ID, nullable=True),
        sa.Column("event_type", EVENT_TYPE, nullable=True),
        sa.Column("aggregate_type", AGG_TYPE, nullable=True),
        sa.Column("aggregate_id", AGG_ID, nullable=True),
        sa.Column("aggregate_version", sa.Integer, nullable=True),
        sa.Column("reason", sa.String(40), nullable=False),
        sa.Column("exception_type", sa.String(200), nullable=False),
        sa.Column("exception_message", sa.Text, nullable=False),
        sa.Column("record_key", sa.LargeBinary, nullable=True),
        sa.Column("record_value", sa.LargeBinary, nullable=True),
        sa.Column("record_headers", sa.Text, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("first_failed_at", WHEN, nullable=False),
        sa.Column("last_failed_at", WHEN, nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=True),
        sa.Column("decision_note", sa.Text, nullable=True),
    )
    op.create_index("ix_failed_event_event_id", "failed_event", ["event_id"])


def downgrade() -> None:
    """Drop the four framework tables (and with them every dedup record)."""
    op.drop_index("ix_failed_event_event_id", table_name="failed_event")
    op.drop_table("failed_event")
    op.drop_index("ix_parked_event_aggregate", table_name="parked_event")
    op.drop_table("parked_event")
    op.drop_table("aggregate_version")
    op.drop_table("consumed_event")
