"""On MySQL and MariaDB the example tables' ids that differ only by trailing spaces are two ids.

``utf8mb4_bin`` (revision 0002) is a PAD SPACE collation on MariaDB 10.x and MySQL
8: ``'u1' = 'u1 '``. A user ``customer-1 `` then shared ``customer-1``'s balance
row, and a notification for event ``e1 `` met ``e1``'s unique key. Every id column
gets the server's NO PAD binary collation, as the framework's did (its revision
0005): ``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on MySQL. NO PAD
equality is finer, so existing keys stay unique. Downgrading restores
``utf8mb4_bin``; it fails on a table that holds two ids differing only by trailing
spaces by then. Other databases compare bytes already and are left alone.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-09
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

MARIADB_NO_PAD = "utf8mb4_nopad_bin"
MYSQL_NO_PAD = "utf8mb4_0900_bin"

# table -> (column, length) of every id column, all NOT NULL.
ID_COLUMNS: dict[str, list[tuple[str, int]]] = {
    "user_points": [("user_id", 128)],
    "points_award": [("order_id", 128), ("user_id", 128)],
    "inventory_stock": [("sku", 64)],
    "inventory_reservation": [("order_id", 128), ("sku", 64)],
    "notification": [("event_id", 128), ("order_id", 128), ("user_id", 128)],
}


def upgrade() -> None:
    """MySQL/MariaDB: every id column to the server's NO PAD binary collation."""
    dialect = op.get_bind().dialect
    if dialect.name in ("mysql", "mariadb"):
        _collate(MARIADB_NO_PAD if getattr(dialect, "is_mariadb", False) else MYSQL_NO_PAD)


def downgrade() -> None:
    """MySQL/MariaDB: back to ``utf8mb4_bin``, as revision 0002 left them."""
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        _collate("utf8mb4_bin")


def _collate(collation: str) -> None:
    for table, columns in ID_COLUMNS.items():
        changes = ", ".join(
            f"MODIFY `{name}` VARCHAR({length}) CHARACTER SET utf8mb4 COLLATE {collation} NOT NULL"
            for name, length in columns
        )
        op.execute(f"ALTER TABLE `{table}` {changes}")
