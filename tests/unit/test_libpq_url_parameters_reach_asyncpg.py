"""libpq's URL parameters that asyncpg takes in other forms reach it; the rest are named.

Contract (``app.db.connect_options``): on a PostgreSQL URL, ``application_name`` and each
``-c name=value`` of ``options`` become asyncpg's ``server_settings``, ``connect_timeout``
its connect ``timeout``; they leave the URL SQLAlchemy gets. Parameters asyncpg takes as
they are (``target_session_attrs``...) stay. Any other parameter is a ``ValueError`` at
settings validation naming it and what is read (before, asyncpg refused it with a
``TypeError`` at every connection: the commands printed a traceback, the worker's
batches failed), never the password; so is ``options`` not in libpq's form and a
``connect_timeout`` that is no positive number. The server sees the settings.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text

from app.db import connect_options
from app.db.engine import create_engine
from app.db.urls import normalise_database_url
from tests.conftest import unavailable

PG = "postgresql+asyncpg://app:s3cret@db.example:5432/orders"
SERVER = os.environ.get("EO_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432")


def test_application_name_options_and_connect_timeout_become_asyncpgs() -> None:
    url = f"{PG}?application_name=ops&connect_timeout=7&options=-c%20search_path%3Dshop"

    found = connect_options.read(url)

    assert found.url == PG
    assert found.connect_args() == {
        "server_settings": {"application_name": "ops", "search_path": "shop"},
        "timeout": 7.0,
    }


def test_what_asyncpg_takes_as_it_is_stays_in_the_url() -> None:
    url = f"{PG}?target_session_attrs=read-write"

    assert connect_options.read(url).url == url


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("fallback_application_name=x", "fallback_application_name is not read by"),
        ("keepalives=1", "keepalives is not read by"),
        ("options=search_path", "options must be -c name=value"),
        ("connect_timeout=soon", "connect_timeout is not a number of seconds"),
        ("connect_timeout=0", "connect_timeout must be more than 0"),
    ],
)
def test_anything_else_is_named_at_start_without_the_password(query: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        normalise_database_url(f"postgresql://app:s3cret@db.example/orders?{query}")

    assert "s3cret" not in str(caught.value)


@pytest.mark.integration
async def test_the_server_sees_the_settings() -> None:
    url = normalise_database_url(
        f"{SERVER}/postgres?application_name=eo-probe&options=-c%20work_mem%3D7MB"
    )
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            name = await conn.scalar(text("SELECT current_setting('application_name')"))
            work_mem = await conn.scalar(text("SELECT current_setting('work_mem')"))
    except OSError as exc:
        unavailable(f"PostgreSQL at {SERVER}: {exc}")
    finally:
        await engine.dispose()

    assert (name, work_mem) == ("eo-probe", "7MB")
