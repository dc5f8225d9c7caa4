"""The example consumers' tables (SQLAlchemy Core), all on ``example_metadata``.

The example's own Alembic revisions (``handlers/migrations``) create them; a
unit test checks that they still match these definitions.

Invariants:
- ``user_points.balance`` is the sum of the ``points`` of the user's
  ``points_award`` rows that are not revoked.
- ``inventory_stock.reserved`` is the sum of ``inventory_reservation.qty`` for
  that sku; a cancelled order's reservation rows are deleted.
- ``notification`` has at most one row per event (``event_id`` is unique).
- Ids compare as bytes on every database, as in Python: ``ORDER-A`` and
  ``order-a`` are two orders, ``u1`` and ``u1 `` two users (MySQL/MariaDB: the
  server's NO PAD binary collation, ``app.binary_id``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

from app import binary_id

example_metadata = MetaData()

ID = 128  # order and user ids: as long as an aggregate id (app.db.tables.AGG_ID)
SKU = 64  # schemas.order.OrderItem.sku


user_points = Table(
    "user_points",
    example_metadata,
    Column("user_id", binary_id(ID), primary_key=True),
    Column("balance", BigInteger, nullable=False),
)

points_award = Table(
    "points_award",
    example_metadata,
    Column("order_id", binary_id(ID), primary_key=True),
    Column("user_id", binary_id(ID), nullable=False),
    Column("points", BigInteger, nullable=False),
    # Set when the order is cancelled and the points are taken back; the row
    # stays so that neither a second cancel nor a late payment counts twice.
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

inventory_stock = Table(
    "inventory_stock",
    example_metadata,
    Column("sku", binary_id(SKU), primary_key=True),
    Column("reserved", BigInteger, nullable=False),
)

inventory_reservation = Table(
    "inventory_reservation",
    example_metadata,
    Column("order_id", binary_id(ID), primary_key=True),
    Column("sku", binary_id(SKU), primary_key=True),
    Column("qty", BigInteger, nullable=False),
)

notification = Table(
    "notification",
    example_metadata,
    # SQLite only auto-increments an INTEGER PRIMARY KEY (the rowid alias).
    Column(
        "id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("event_id", binary_id(ID), nullable=False),
    Column("order_id", binary_id(ID), nullable=False),
    Column("user_id", binary_id(ID), nullable=False),
    Column("kind", String(40), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("event_id", name="uq_notification_event_id"),
)
