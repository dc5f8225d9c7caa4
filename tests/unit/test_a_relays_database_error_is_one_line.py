"""A relay's log line of a database error says what the driver said, in one line.

Contract: ``relay._describe`` of a SQLAlchemy error is ``Type: <the driver's first line>``,
scrubbed: neither SQLAlchemy's statement (``[SQL: ...]``) nor its link to the docs; the
relay logs one such line per failed attempt (the chaos soak's database faults wrote the
statement and the link for every one).
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from app.outbox import relay

PASSWORD = "s3cr3t-Pa55"


class DriverError(Exception):
    pass


def test_a_database_error_is_the_drivers_first_line() -> None:
    driver = DriverError(
        "connection was closed in the middle of operation: terminating connection due to "
        f"administrator command (postgresql://app:{PASSWORD}@db:5432/orders)\nDETAIL: more"
    )
    error = DBAPIError("UPDATE outbox_event SET status=$1 WHERE id = ANY ($2)", None, driver)

    said = relay._describe(error)

    assert said == (
        "DBAPIError: connection was closed in the middle of operation: terminating connection "
        "due to administrator command (postgresql://app:***@db:5432/orders)"
    )
