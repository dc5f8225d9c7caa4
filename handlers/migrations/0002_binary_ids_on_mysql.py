"""On MySQL and MariaDB the example tables' ids compare as bytes, as in Python.

Their default collations ignore case (``utf8mb4_general_ci``): ``ORDER-A``
and ``order-a`` would be one order, and the second award or reservation
would collide with the first. ``utf8mb4_bin`` tells them apart; PostgreSQL
and SQLite compare strings as bytes already, and get nothing here.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# (table, column, length): every id column of the example tables, all NOT NULL.
ID_COLUMNS = (
    ("user_points", "user_id", 128),
    ("points_award", "order_id", 128),
    ("points_award", "user_id", 128),
    ("inventory_stock", "sku", 64),
    ("inventory_reservation", "order_id", 128),
    ("inventory_reservation", "sku", 64),
    ("notification", "event_id", 128),
    ("notification", "order_id", 128),
    ("notification", "user_id", 128),
)


def upgrade() -> None:
    """Give every id column the binary collation (MySQL and MariaDB only)."""
    _retype(lambda length: mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"))


def downgrade() -> None:
    """Back to the database's default collation."""
    _retype(sa.String)


def _retype(new_type: Callable[[int], sa.types.TypeEngine[str]]) -> None:
    if op.get_bind().dialect.name not in ("mysql", "mariadb"):
        return
    for table, column, length in ID_COLUMNS:
        op.alter_column(
            table,
            column,
            type_=new_type(length),
            existing_type=sa.String(length),
            existing_nullable=False,
        )
