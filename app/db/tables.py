"""The framework's own tables (SQLAlchemy Core). Alembic migrations create them.

Invariants:
- ``consumed_event`` has one row per (consumer_group, event_id) that took effect;
  its primary key is the dedup record.
- ``aggregate_version.last_version`` is the last version applied for that consumer;
  ``NULL`` means "row exists, nothing applied yet" (used by the from-first-seen policy).
- ``parked_event`` holds events that arrived ahead of their aggregate's next version,
  with their raw bytes, until the gap closes.
- ``failed_event`` has one row per event that failed for a consumer, or could not
  be read at all (consumer_group ``''``), keyed by the record's ORIGINAL topic,
  partition and offset (stable across retry trips), with the reason and a
  ``status``: ``retrying`` (in a retry tier), ``dead`` (in the DLT),
  ``replayed`` / ``skip-requested`` (an operator acted), ``resolved`` (a later
  attempt applied it) or ``skipped`` (its consumer moved on without it; for
  poison, a consumer an operator skipped it for did).
- ``database_identity`` holds one random id, written when the tables are created:
  what the Redis prefilter's keys are namespaced by, so that they never speak
  for another database (a fresh one, or one restored and given a new id).
- Ids and types compare byte for byte on every database: on MySQL and MariaDB
  their columns use a NO PAD binary collation (``binary_id``), where the default
  one would make ``ORDER-A``, ``order-a`` and ``órder-a`` one aggregate, and
  ``utf8mb4_bin`` (PAD SPACE) would make ``e1`` and ``e1 `` one event.
- ``outbox_event`` holds events to publish, written in the transaction that decided
  them (by an order service, by ``ctx.emit``, or by the worker's own failure routing),
  until the relay ships them (``app.outbox``). Other languages insert into it with
  plain SQL: every column they may leave out has a server default.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

# The collation of every id and type column on MySQL and MariaDB (see the migration 0005):
# binary, and NO PAD, so that trailing spaces count. Each server names its own.
MARIADB_BINARY_COLLATION = "utf8mb4_nopad_bin"
MYSQL_BINARY_COLLATION = "utf8mb4_0900_bin"

metadata = MetaData()

CONSUMER = 100
EVENT_ID = 128
AGG_TYPE = 100
AGG_ID = 128
EVENT_TYPE = 100
TOPIC = 249
INTEGER_MAX = 2**31 - 1  # the largest value an ``Integer`` column stores on every backend
BIGINT_MAX = 2**63 - 1  # ... and a ``BigInteger`` column


def binary_collation(dialect: Dialect) -> str:
    """The NO PAD binary collation of the MySQL or MariaDB server ``dialect`` speaks to."""
    mariadb = getattr(dialect, "is_mariadb", False)
    return MARIADB_BINARY_COLLATION if mariadb else MYSQL_BINARY_COLLATION


class _BinaryId(TypeDecorator[str]):
    """``VARCHAR(length)``; on MySQL and MariaDB in the server's NO PAD binary collation
    (known only once connected, so chosen per dialect rather than as a variant)."""

    impl = String
    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        length = self.length
        if dialect.name in ("mysql", "mariadb"):
            exact = mysql.VARCHAR(length, charset="utf8mb4", collation=binary_collation(dialect))
            return dialect.type_descriptor(exact)
        return dialect.type_descriptor(String(length))


def binary_id(length: int) -> TypeEngine[str]:
    """A string id compared as bytes, trailing spaces included: MySQL's and MariaDB's default
    collations ignore case and accents, and ``utf8mb4_bin`` ignores trailing spaces."""
    return _BinaryId(length)


consumed_event = Table(
    "consumed_event",
    metadata,
    # The selective column leads every key (see the first migration).
    Column("event_id", binary_id(EVENT_ID), primary_key=True),
    Column("consumer_group", binary_id(CONSUMER), primary_key=True),
    Column("event_type", binary_id(EVENT_TYPE), nullable=False),
    Column("aggregate_type", binary_id(AGG_TYPE), nullable=False),
    Column("aggregate_id", binary_id(AGG_ID), nullable=False),
    Column("aggregate_version", Integer, nullable=True),
    Column("applied_at", DateTime(timezone=True), nullable=False),
    # Retention deletes by age (``app.outbox.cleanup``); BRIN on PostgreSQL: the rows come
    # in time order, and a block-range index costs the dedup insert next to nothing.
    Index("ix_consumed_event_applied_at", "applied_at", postgresql_using="brin"),
)

aggregate_version = Table(
    "aggregate_version",
    metadata,
    Column("aggregate_id", binary_id(AGG_ID), primary_key=True),
    Column("aggregate_type", binary_id(AGG_TYPE), primary_key=True),
    Column("consumer_group", binary_id(CONSUMER), primary_key=True),
    Column("last_version", Integer, nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

MYSQL = ("mysql", "mariadb")

# Larger than MySQL's TEXT and BLOB (64 KB): a Kafka record may reach 1 MB and more.
LONG_TEXT = Text().with_variant(mysql.MEDIUMTEXT(), *MYSQL)
LONG_BYTES = LargeBinary().with_variant(mysql.MEDIUMBLOB(), *MYSQL)

parked_event = Table(
    "parked_event",
    metadata,
    Column("event_id", binary_id(EVENT_ID), primary_key=True),
    Column("consumer_group", binary_id(CONSUMER), primary_key=True),
    Column("aggregate_type", binary_id(AGG_TYPE), nullable=False),
    Column("aggregate_id", binary_id(AGG_ID), nullable=False),
    Column("aggregate_version", Integer, nullable=False),
    Column("event_type", binary_id(EVENT_TYPE), nullable=False),
    Column("topic", binary_id(TOPIC), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("record_key", LONG_BYTES, nullable=True),
    Column("record_value", LONG_BYTES, nullable=False),
    Column("record_headers", LONG_TEXT, nullable=False),
    Column("parked_at", DateTime(timezone=True), nullable=False),
    Index("ix_parked_event_aggregate", "aggregate_id", "aggregate_type", "consumer_group"),
)

failed_event = Table(
    "failed_event",
    metadata,
    Column("consumer_group", binary_id(CONSUMER), primary_key=True),
    Column("topic", binary_id(TOPIC), primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("offset", BigInteger, primary_key=True),
    Column("event_id", binary_id(EVENT_ID), nullable=True),
    Column("event_type", binary_id(EVENT_TYPE), nullable=True),
    Column("aggregate_type", binary_id(AGG_TYPE), nullable=True),
    Column("aggregate_id", binary_id(AGG_ID), nullable=True),
    Column("aggregate_version", Integer, nullable=True),
    Column("reason", String(40), nullable=False),
    Column("exception_type", String(200), nullable=False),
    Column("exception_message", Text, nullable=False),
    Column("record_key", LONG_BYTES, nullable=True),
    Column("record_value", LONG_BYTES, nullable=True),
    Column("record_headers", LONG_TEXT, nullable=False),
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("first_failed_at", DateTime(timezone=True), nullable=False),
    Column("last_failed_at", DateTime(timezone=True), nullable=False),
    Column("decided_by", String(200), nullable=True),
    Column("decision_note", Text, nullable=True),
    Index("ix_failed_event_event_id", "event_id"),
)

database_identity = Table(
    "database_identity",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)


# Microseconds on MySQL too (its DATETIME keeps whole seconds unless told): latency is measured.
MOMENT = DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *MYSQL)

OUTBOX_EVENT_ID = 64
OUTBOX_AGG_ID = 64
OUTBOX_EVENT_TYPE = 128
OUTBOX_TOPIC = 128
OUTBOX_KEY = 128

NOT_PUBLISHED = text("status <> 'PUBLISHED'")
OUTBOX_STATUSES = "('PENDING', 'PROCESSING', 'PUBLISHED', 'DEAD')"
"""Every ``OutboxStatus``, as the SQL list the status column's constraint allows."""

outbox_event = Table(
    "outbox_event",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("event_id", binary_id(OUTBOX_EVENT_ID), nullable=False),
    Column("aggregate_type", binary_id(AGG_TYPE), nullable=False),
    Column("aggregate_id", binary_id(OUTBOX_AGG_ID), nullable=False),
    Column("event_type", String(OUTBOX_EVENT_TYPE), nullable=False),
    Column("topic", binary_id(OUTBOX_TOPIC), nullable=False),
    Column("event_key", binary_id(OUTBOX_KEY), nullable=True),
    Column("payload", LONG_TEXT, nullable=False),
    Column("headers", LONG_TEXT, nullable=True),
    Column("aggregate_version", Integer, nullable=True),
    # One of ``OutboxStatus``, spelt exactly (binary on MySQL/MariaDB; migration 0007).
    Column("status", binary_id(16), nullable=False, server_default="PENDING"),
    Column("retry_count", Integer, nullable=False, server_default="0"),
    Column("next_retry_at", MOMENT, nullable=True),
    Column("created_at", MOMENT, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    Column("published_at", MOMENT, nullable=True),
    Column("updated_at", MOMENT, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    Column("lease_owner", String(100), nullable=True),
    Column("lease_expires_at", MOMENT, nullable=True),
    Column("last_error", Text, nullable=True),
    # The worker's own retry and DLT records: the original record's bytes, sent as they are
    # (``record_headers``: a JSON list of [name, base64 value]; set only on such rows).
    Column("record_key", LONG_BYTES, nullable=True),
    Column("record_value", LONG_BYTES, nullable=True),
    Column("record_headers", LONG_TEXT, nullable=True),
    UniqueConstraint("event_id", name="uq_outbox_event_event_id"),
    CheckConstraint(f"status IN {OUTBOX_STATUSES}", name="ck_outbox_event_status"),
    # The relay's scan: unpublished rows in id order, one status at a time; and an
    # aggregate's earlier unpublished rows. On PostgreSQL only the rows not published
    # (migration 0006): marking a row published then writes neither index.
    Index("ix_outbox_event_status_id", "status", "id", postgresql_where=NOT_PUBLISHED),
    Index(
        "ix_outbox_event_aggregate",
        "aggregate_type",
        "aggregate_id",
        "id",
        postgresql_where=NOT_PUBLISHED,
    ),
)
