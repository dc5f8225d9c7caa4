"""Turn the database URLs hosting platforms hand out into async SQLAlchemy URLs."""

from __future__ import annotations

_ASYNC_DRIVERS = {
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "mysql": "mysql+aiomysql",
    "mariadb": "mysql+aiomysql",
    "sqlite": "sqlite+aiosqlite",
}


def normalise_database_url(url: str) -> str:
    """Pick the async driver for a plain ``postgres://``, ``mysql://`` or ``sqlite://`` URL.

    A URL that already names a driver (``postgresql+asyncpg://``) is kept as it is.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL (expected scheme://...): {url!r}")
    if "+" in scheme:
        return url
    driver = _ASYNC_DRIVERS.get(scheme.lower())
    if driver is None:
        raise ValueError(f"unsupported database scheme {scheme!r}; use postgresql, mysql or sqlite")
    return f"{driver}://{rest}"
