"""Parked and failed records as large as the outbox's on MySQL/MariaDB.

``parked_event`` and ``failed_event`` keep the record as it arrived, its key and value in
``LargeBinary`` columns and its headers in ``Text``: 64 KB on MySQL/MariaDB (``BLOB``,
``TEXT``), while a Kafka record reaches 1 MB by default. An event over 64 KB that parked
(its version ahead) or failed made the batch's insert fail with "Data too long", a crash
of the worker that came back at every start (the offset never moved). They become
``MEDIUMBLOB`` and ``MEDIUMTEXT`` (16 MB), as ``outbox_event``'s record columns are since
0003. Other databases' columns hold any size already: nothing changes there.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# (table, nullable record_value): parked events always have a value, poison may not.
TABLES = (("parked_event", False), ("failed_event", True))


def upgrade() -> None:
    """MEDIUMBLOB and MEDIUMTEXT for the record columns on MySQL/MariaDB."""
    _record_columns("MEDIUMBLOB", "MEDIUMTEXT")


def downgrade() -> None:
    """Back to BLOB and TEXT (a row larger than 64 KB makes this fail: delete it first)."""
    _record_columns("BLOB", "TEXT")


def _record_columns(binary: str, text: str) -> None:
    if op.get_bind().dialect.name != "mysql":
        return
    for table, value_nullable in TABLES:
        value_null = "NULL" if value_nullable else "NOT NULL"
        op.execute(
            f"ALTER TABLE `{table}` MODIFY `record_key` {binary} NULL, "
            f"MODIFY `record_value` {binary} {value_null}, "
            f"MODIFY `record_headers` {text} NOT NULL"
        )
