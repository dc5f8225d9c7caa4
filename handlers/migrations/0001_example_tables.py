"""The example consumers' tables: points, inventory and notification services.

Mirrors ``handlers/tables.py`` as it was when written. A database built
before the example had migrations of its own already holds these tables (the
framework's revision 0002 created them then): each table found with exactly
these columns is taken over as it is, rows and all. A table of the same name
with other columns is not the example's, and the upgrade stops with a
``ConfigurationError`` naming it.

Revision ID: 0001
Revises:
Create Date: 2026-12-04
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from app import ConfigurationError

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(128)
SKU = sa.String(64)


def tables() -> dict[str, list[sa.Column[Any] | sa.Constraint]]:
    """Each table's columns and constraints (new objects on every call)."""
    return {
        "user_points": [
            sa.Column("user_id", ID, primary_key=True),
            sa.Column("balance", sa.BigInteger, nullable=False),
        ],
        "points_award": [
            sa.Column("order_id", ID, primary_key=True),
            sa.Column("user_id", ID, nullable=False),
            sa.Column("points", sa.BigInteger, nullable=False),
            sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        ],
        "inventory_stock": [
            sa.Column("sku", SKU, primary_key=True),
            sa.Column("reserved", sa.BigInteger, nullable=False),
        ],
        "inventory_reservation": [
            sa.Column("order_id", ID, primary_key=True),
            sa.Column("sku", SKU, primary_key=True),
            sa.Column("qty", sa.BigInteger, nullable=False),
        ],
        "notification": [
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
        ],
    }


def upgrade() -> None:
    """Create the five tables, taking over those an older database already holds."""
    inspector = sa.inspect(op.get_bind())
    existing = set(inspector.get_table_names())
    for name, items in tables().items():
        if name not in existing:
            op.create_table(name, *items)
            continue
        declared = {item.name for item in items if isinstance(item, sa.Column)}
        found = {column["name"] for column in inspector.get_columns(name)}
        if found != declared:
            raise ConfigurationError(
                f"the example consumers (HANDLER_MODULES 'handlers') need a table {name!r}, "
                f"and the database has one of its own (columns {', '.join(sorted(found))}); "
                "take 'handlers' out of HANDLER_MODULES, or rename that table"
            )


def downgrade() -> None:
    """Drop the example consumers' tables."""
    for name in reversed(tables()):
        op.drop_table(name)
