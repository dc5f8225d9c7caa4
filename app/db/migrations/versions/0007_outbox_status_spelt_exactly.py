"""``outbox_event.status`` holds one of the relay's four statuses, spelt exactly.

A row inserted by hand with another status (a Go struct's zero value ``''``, a
lower-case ``'pending'``) was never published, and nothing said so: no metric, no
``/ready`` check, no ``outbox list``. On MySQL/MariaDB, whose default collation ignores
case, ``'pending'`` also matched the relay's scan but not its code, so the aggregate's
later rows waited behind it forever. The column gets the server's NO PAD binary
collation on MySQL/MariaDB (compared byte for byte, as the id columns are since 0005)
and a CHECK constraint on every database: such an insert now fails in the producer's
own transaction, naming ``ck_outbox_event_status``. Rows already written with another
status become ``PENDING``, what the server writes when the column is left out: they
are published (consumers absorb a copy of one that was, by its event id).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

STATUSES = "('PENDING', 'PROCESSING', 'PUBLISHED', 'DEAD')"
NAME = "ck_outbox_event_status"
MARIADB_NO_PAD = "utf8mb4_nopad_bin"
MYSQL_NO_PAD = "utf8mb4_0900_bin"


def upgrade() -> None:
    """Exact comparison on MySQL/MariaDB, stray statuses to ``PENDING``, the constraint."""
    dialect = op.get_bind().dialect
    if dialect.name == "mysql":
        collation = MARIADB_NO_PAD if getattr(dialect, "is_mariadb", False) else MYSQL_NO_PAD
        _status_collation(f"CHARACTER SET utf8mb4 COLLATE {collation}")
    op.execute(f"UPDATE outbox_event SET status = 'PENDING' WHERE status NOT IN {STATUSES}")
    with op.batch_alter_table("outbox_event") as batch:
        batch.create_check_constraint(NAME, f"status IN {STATUSES}")


def downgrade() -> None:
    """Drop the constraint; MySQL/MariaDB's column back to the table's collation."""
    with op.batch_alter_table("outbox_event") as batch:
        batch.drop_constraint(NAME, type_="check")
    if op.get_bind().dialect.name == "mysql":
        _status_collation("")


def _status_collation(clause: str) -> None:
    op.execute(
        f"ALTER TABLE `outbox_event` MODIFY `status` VARCHAR(16) {clause} "
        "NOT NULL DEFAULT 'PENDING'"
    )
