"""Plain database URLs from hosting platforms get the async driver the framework needs.

Contract: ``normalise_database_url`` maps ``postgres://`` and ``postgresql://``
to ``postgresql+asyncpg://``, ``mysql://`` and ``mariadb://`` to
``mysql+aiomysql://`` and ``sqlite://`` to ``sqlite+aiosqlite://`` (scheme case
ignored), keeping the rest of the URL byte for byte; a URL that already names
a driver is returned unchanged if it is one of those three (any other, psycopg2,
PyMySQL, psycopg or asyncmy, is named: the framework's connect arguments are theirs);
anything else is a ``ValueError``, and so is an ``@`` left unencoded in a password
(SQLAlchemy would take the rest for the host, print it and wait for a host that never
answers), without quoting the password.
"""

from __future__ import annotations

import pytest

from app.db.urls import normalise_database_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgres://u:p@db:5432/orders", "postgresql+asyncpg://u:p@db:5432/orders"),
        (
            "postgresql://u:p@db/orders?sslmode=require",
            "postgresql+asyncpg://u:p@db/orders?sslmode=require",
        ),
        ("POSTGRES://u@db/orders", "postgresql+asyncpg://u@db/orders"),
        ("mysql://u:p%40ss@db:3306/orders", "mysql+aiomysql://u:p%40ss@db:3306/orders"),
        ("mariadb://u@db/orders", "mysql+aiomysql://u@db/orders"),
        ("sqlite:///./effectively_once.db", "sqlite+aiosqlite:///./effectively_once.db"),
        ("sqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
        ("sqlite:////var/data/eo.db", "sqlite+aiosqlite:////var/data/eo.db"),
    ],
)
def test_a_plain_scheme_gets_its_async_driver(url: str, expected: str) -> None:
    assert normalise_database_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://u@db/orders",
        "mysql+aiomysql://u@db/orders",
        "sqlite+aiosqlite:///x.db",
    ],
)
def test_a_url_naming_its_driver_is_kept(url: str) -> None:
    assert normalise_database_url(url) == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("oracle://u@db/orders", "unsupported database scheme 'oracle'"),
        ("mongodb://db/orders", "unsupported database scheme 'mongodb'"),
        ("orders.db", "not a database URL"),
        ("", "not a database URL"),
        ("postgres:/db", "not a database URL"),
    ],
)
def test_anything_else_is_rejected(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalise_database_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:s3cr@tpass@db.example/orders",
        "mysql://root:r00t@xyzzy@db/orders",
        "postgresql://app:s3cr@tpass/word@db.example/orders",
    ],
)
def test_an_unencoded_at_sign_in_the_password_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(ValueError, match="percent-encoded, as %40") as caught:
        normalise_database_url(url)

    password = url.split("://")[1].split(":")[1].rsplit("@", 1)[0]
    assert password not in str(caught.value)
    assert password.split("@")[1] not in str(caught.value)  # the part taken for the host


def test_an_at_sign_written_as_percent_40_is_kept() -> None:
    url = "postgresql://app:s3cr%40tpass@db.example/orders"

    assert normalise_database_url(url) == "postgresql+asyncpg://app:s3cr%40tpass@db.example/orders"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg2://u:pw@db/orders",
        "mysql+pymysql://u:pw@db/orders",
        "postgresql+psycopg://u:pw@db/orders",  # async, but its connect arguments differ
        "mysql+asyncmy://u:pw@db/orders",
    ],
)
def test_a_driver_the_framework_cannot_run_on_is_named(url: str) -> None:
    with pytest.raises(ValueError, match="which the framework does not use") as caught:
        normalise_database_url(url)

    assert "pw@" not in str(caught.value)
