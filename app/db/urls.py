"""Turn the database URLs hosting platforms hand out into async SQLAlchemy URLs.

A URL may hold a password, so no message here quotes it: a mistake is named
by what is wrong (the scheme, the port, a TLS parameter), and ``shown`` masks the
passwords of a URL that is printed (where the database could not be reached, say).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url

from app.db import connect_options
from app.extras import require

_ASYNC_DRIVERS = {
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "mysql": "mysql+aiomysql",
    "mariadb": "mysql+aiomysql",
    "sqlite": "sqlite+aiosqlite",
}
_NOT_SHOWN = "(the value is not shown: it may hold a password)"
_ASYNC_DRIVER_NAMES = {"asyncpg", "aiomysql", "aiosqlite"}  # the connect arguments are theirs
# The drivers of the optional extras: (module, extra, what the URL is).
_EXTRAS = {
    "postgresql+asyncpg": ("asyncpg", "postgres", "a PostgreSQL database URL"),
    "mysql+aiomysql": ("aiomysql", "mysql", "a MySQL or MariaDB database URL"),
}


def normalise_database_url(url: str) -> str:
    """Pick the async driver for a plain ``postgres://``, ``mysql://`` or ``sqlite://`` URL.

    A URL that already names a driver (``postgresql+asyncpg://``) is kept as it is.
    Raises ``ValueError`` for anything that is not a usable URL, without quoting it, for a
    driver that is not installed (naming the extra that brings it), and for a TLS
    parameter that cannot be used (its files are read here: see ``app.db.tls``).
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(
            f"not a database URL: no scheme, expected postgresql://, mysql:// or sqlite:// "
            f"{_NOT_SHOWN}"
        )
    if "+" in scheme:
        named = scheme.partition("+")[2].lower()
        if named not in _ASYNC_DRIVER_NAMES:
            raise ValueError(
                f"the database URL names the driver {named!r}, which the framework does not "
                "use; write postgresql://, mysql:// or sqlite:// and it picks asyncpg, "
                "aiomysql or aiosqlite"
            )
        normalised = url
    else:
        driver = _ASYNC_DRIVERS.get(scheme.lower())
        if driver is None:
            raise ValueError(
                f"unsupported database scheme {scheme!r}; use postgresql, mysql or sqlite"
            )
        normalised = f"{driver}://{rest}"
    check_parts(normalised)
    extra = _EXTRAS.get(normalised.partition("://")[0].lower())
    if extra is not None:
        require(*extra)
    connect_options.read(normalised)
    return normalised


def check_parts(url: str) -> None:
    """``ValueError`` (naming the part, not the value) unless ``url`` parses into a host and
    a port a driver can connect to."""
    try:
        parsed = make_url(url)
    except ValueError:
        raise ValueError(f"the port of the database URL is not a number {_NOT_SHOWN}") from None
    except Exception:  # SQLAlchemy's ArgumentError: no shape it reads
        raise ValueError(f"the database URL cannot be parsed {_NOT_SHOWN}") from None
    if parsed.port is not None and not 0 < parsed.port < 65_536:
        raise ValueError("the port of the database URL is not between 1 and 65535")
    if parsed.host is not None and any(c.isspace() for c in parsed.host):
        raise ValueError(f"the host of the database URL contains a space {_NOT_SHOWN}")
    before_query = url.partition("://")[2].partition("?")[0]
    if (parsed.host is not None and "@" in parsed.host) or before_query.count("@") > 1:
        # SQLAlchemy ends the password at its first "@": the rest would be taken for the
        # host (never reached) and printed with it.
        raise ValueError(
            "the database URL holds an '@' in its password or user name: write it "
            f"percent-encoded, as %40 {_NOT_SHOWN}"
        )


def shown(url: str) -> str:
    """``url`` as it may be printed: the password and ``sslpassword`` masked (``***``)."""
    try:
        parsed = make_url(url)
        if "sslpassword" in parsed.query:
            parsed = parsed.update_query_dict({"sslpassword": "***"})
        return parsed.render_as_string(hide_password=True)
    except Exception:
        return "(a database URL that cannot be parsed)"


def missing_sqlite_file(url: str) -> str | None:
    """The path of the SQLite file ``url`` names when there is no such file (a command that
    only reads or cleans must not create an empty one, and then report a missing table);
    None for any other URL."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    path = parsed.database or ""
    return path if path and path != ":memory:" and not Path(path).exists() else None
