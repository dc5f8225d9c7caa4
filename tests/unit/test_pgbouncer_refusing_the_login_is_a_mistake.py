"""PgBouncer's refusal of a login is named as the server's is: a mistake, not an outage.

Contract: PgBouncer refuses a wrong password or an unknown user as a protocol violation
(SQLSTATE ``08P01``: "SASL authentication failed", "password authentication failed",
"no such user"), not as PostgreSQL's ``28P01``; ``refusal`` names it the same way (the
worker and the relay then stop at start in one line, exit code 2). Its other ``08P01``
errors (its own login to the server failing for now) are not a refusal: waited for.
(Through PgBouncer, a wrong password was retried for ever as an outage, while the
worker held partitions.)
"""

from __future__ import annotations

import asyncpg
import pytest

from app.db.refusal import refusal

URL = "postgresql://app:pw@127.0.0.1:6432/orders?pgbouncer=true"


@pytest.mark.parametrize(
    "said",
    [
        "SASL authentication failed",
        'password authentication failed for user "app"',
        'no such user: "app"',
    ],
)
def test_a_refused_login_is_named(said: str) -> None:
    refused = asyncpg.exceptions.ProtocolViolationError(said)

    assert refusal(refused, URL) == (
        f"it refused the login ({said}); check the user and password of DATABASE_URL"
    )


def test_its_own_login_to_the_server_failing_is_waited_for() -> None:
    failing = asyncpg.exceptions.ProtocolViolationError(
        "server login has been failing, try again later (server_login_retry)"
    )

    assert refusal(failing, URL) is None
