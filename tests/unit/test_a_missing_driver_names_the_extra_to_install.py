"""A setting whose driver is not installed names the extra that brings it.

Contract: a ``postgresql://`` ``DATABASE_URL`` without asyncpg, a ``mysql://`` one
without aiomysql, and a ``REDIS_URL`` without redis-py are refused when the settings
are read, with the ``pip install 'effectively-once[...]'`` to run, the URL not quoted
(a worker exits with that one line, not a ``ModuleNotFoundError`` traceback at its
first connection). SQLite's driver is always installed.
"""

from __future__ import annotations

import importlib.util

import pytest
from pydantic import ValidationError

from app import extras
from app.settings import Settings, describe

REAL_FIND_SPEC = importlib.util.find_spec


@pytest.mark.parametrize(
    ("settings", "missing", "extra"),
    [
        ({"database_url": "postgresql://app:s3cret@db/orders"}, "asyncpg", "postgres"),
        ({"database_url": "mariadb://app:s3cret@db/orders"}, "aiomysql", "mysql"),
        ({"redis_url": "redis://:s3cret@cache:6379/0"}, "redis", "redis"),
    ],
)
def test_the_setting_is_refused_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], missing: str, extra: str
) -> None:
    monkeypatch.setattr(
        extras,
        "find_spec",
        lambda name, *args: None if name == missing else REAL_FIND_SPEC(name, *args),
    )

    with pytest.raises(ValidationError) as caught:
        Settings(**settings)  # type: ignore[arg-type]

    message = "\n".join(describe(caught.value))  # what a worker prints
    assert f"pip install 'effectively-once[{extra}]'" in message
    assert f"needs the {missing} driver" in message
    assert "s3cret" not in message


def test_with_every_driver_installed_the_urls_are_taken() -> None:
    settings = Settings(  # type: ignore[call-arg]
        database_url="postgresql://app:s3cret@db/orders", redis_url="redis://cache:6379/0"
    )

    assert settings.database_url.startswith("postgresql+asyncpg://")
