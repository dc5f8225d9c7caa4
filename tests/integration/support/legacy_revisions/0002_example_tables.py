"""Example consumers' tables: points, inventory and notification services.

Mirrors ``handlers/tables.py`` as it was when written.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(128)
SKU = sa.String(64)


def upgrade() -> None:
    """Create the five tables of the example consumers."""
    op.create_table(
        "user_points",
        sa.Column("user_id", ID, primary_key=True),
        sa.Column("balance", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "points_award",
        sa.Column("order_id", ID, primary_key=True),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("points", sa.BigInteger, nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "inventory_stock",
        sa.Column("sku", SKU, primary_key=True),
        sa.Column("reserved", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "inventory_reservation",
        sa.Column("order_id", ID, primary_key=True),
        sa.Column("sku", SKU, primary_key=True),
        sa.Column("qty", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "notification",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("order_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("event_id", name="uq_notification_event_id"),
    )


def downgrade() -> None:
    """Drop the example consumers' tables."""
    for table in (
        "notification",
        "inventory_reservation",
        "inventory_stock",
        "points_award",
        "user_points",
    ):
        op.drop_table(table)
