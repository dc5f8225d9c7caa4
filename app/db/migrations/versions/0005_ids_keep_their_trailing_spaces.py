"""Framework tables: on MySQL and MariaDB, ids that differ only by trailing spaces are two ids.

``utf8mb4_bin`` (revision 0004) is a PAD SPACE collation on MariaDB 10.x and MySQL
8: a comparison pads the shorter text with spaces, so ``'e1' = 'e1 '``. An event
``e1 `` after ``e1`` was one event to the database and two to the worker: the
dedup lookup found ``e1``, the handler ran, the dedup record's insert then hit
``e1``'s key and the batch ran again and again; an aggregate ``A `` read and
overwrote ``A``'s version row. Every id and type column of the framework's tables
(0004's, and the outbox's of 0003) gets the server's NO PAD binary collation
here: ``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on MySQL (one
``ALTER TABLE`` per table). NO PAD equality is finer than PAD SPACE equality,
so the existing keys stay unique and the upgrade meets no conflict. Downgrading
restores ``utf8mb4_bin``; it fails on a table that holds two ids differing only
by trailing spaces by then (they would be one key again). Other databases
compare bytes already and are left alone.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

MARIADB_NO_PAD = "utf8mb4_nopad_bin"
MYSQL_NO_PAD = "utf8mb4_0900_bin"

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
    "outbox_event": [
        ("event_id", 64, False),
        ("aggregate_type", 100, False),
        ("aggregate_id", 64, False),
        ("topic", 128, False),
        ("event_key", 128, True),
    ],
}


def upgrade() -> None:
    """MySQL/MariaDB: every id and type column to the server's NO PAD binary collation."""
    dialect = op.get_bind().dialect
    if dialect.name == "mysql":
        _collate(MARIADB_NO_PAD if getattr(dialect, "is_mariadb", False) else MYSQL_NO_PAD)


def downgrade() -> None:
    """MySQL/MariaDB: back to ``utf8mb4_bin``, as revision 0004 left them."""
    if op.get_bind().dialect.name == "mysql":
        _collate("utf8mb4_bin")


def _collate(collation: str) -> None:
    for table, columns in ID_COLUMNS.items():
        changes = ", ".join(
            f"MODIFY `{name}` VARCHAR({length}) CHARACTER SET utf8mb4 COLLATE {collation} "
            f"{'NULL' if nullable else 'NOT NULL'}"
            for name, length, nullable in columns
        )
        op.execute(f"ALTER TABLE `{table}` {changes}")
