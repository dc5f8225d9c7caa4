"""The test harness reads its ``database_url`` as the worker reads ``DATABASE_URL``.

Contract: a handler author's test names its PostgreSQL or MariaDB database with the URL
the service's worker is given (``postgresql://``, ``mysql://``, no driver named) and the
example service's events apply on it. A database that does not exist is one line naming
it, its password never shown. A database that holds an earlier run's rows is refused,
naming them (its dedup records would turn the test's events into duplicates), unless
the test asks to go on from them (``reuse=True``), as a restarted worker would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy.engine import make_url

from app.errors import ConfigurationError
from app.testing import Harness, Kind, event
from handlers.tables import user_points

pytestmark = pytest.mark.integration

PLAIN = {"postgresql": "postgresql", "mariadb": "mysql"}


def paid(order: str) -> dict[str, object]:
    data = {"orderId": order, "userId": 7, "amount": "19.90", "paidAt": "2024-05-01T12:00:00Z"}
    return event("OrderPaid", order, 1, data)


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_the_url_a_worker_is_given_serves_the_harness(
    backend: str, make_database: Callable[[str], Awaitable[str]]
) -> None:
    url = make_url(await make_database(backend)).set(drivername=PLAIN[backend])
    plain = url.render_as_string(hide_password=False)
    assert "+" not in plain.partition("://")[0]

    payment = paid("o-1")
    async with Harness("handlers", database_url=plain) as h:
        await h.send(payment)  # for each of the three example consumers
        assert [(r["user_id"], r["balance"]) for r in await h.rows(user_points)] == [("7", 19)]

    with pytest.raises(ConfigurationError) as refused:
        async with Harness("handlers", database_url=plain):
            pass
    assert "holds rows of an earlier run (consumed_event: 3, aggregate_version: 3)" in str(
        refused.value
    )
    assert "reuse=True" in str(refused.value)

    async with Harness("handlers", database_url=plain, reuse=True) as h:
        again = await h.send(payment)
        assert {o.kind for o in again} == {Kind.DUPLICATE}


async def test_a_database_that_does_not_exist_is_named_in_one_line(
    make_database: Callable[[str], Awaitable[str]],
) -> None:
    server = make_url(await make_database("postgresql"))
    missing = server.set(
        drivername="postgresql", database="eo_no_such_database", password="s3cret-pw"
    ).render_as_string(hide_password=False)

    with pytest.raises(ConfigurationError) as refused:
        async with Harness("handlers", database_url=missing):
            pass

    said = str(refused.value)
    assert said.startswith("Harness: cannot use the database at postgresql+asyncpg://")
    assert 'database "eo_no_such_database" does not exist' in said
    assert "s3cret-pw" not in said and "\n" not in said
