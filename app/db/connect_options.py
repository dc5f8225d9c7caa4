"""The parameters of a database URL that are the framework's to read, not SQLAlchemy's.

libpq's ``application_name``, ``options`` (``-c name=value``) and ``connect_timeout``,
which asyncpg takes in other forms, are read here too; any other parameter asyncpg
would refuse at each connection is named at start.

TLS (``app.db.tls``) and ``pgbouncer=true`` (``app.db.pgbouncer``) leave the URL's query
here, before SQLAlchemy sees it (it would hand them to the driver, which takes none of
them), and come back as the driver's connect arguments. Every engine is made from
``read``'s answer (``app.db.engine``), so a URL's TLS reaches the worker, the relays,
the migrations and every command alike.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import make_url

from app.db import pgbouncer
from app.db.tls import MYSQL_PARAMETERS, POSTGRESQL_PARAMETERS, DriverSsl, mysql_ssl, postgresql_ssl

PGBOUNCER = "pgbouncer"
_OURS = {
    "postgresql": (*POSTGRESQL_PARAMETERS, PGBOUNCER),
    "mysql": MYSQL_PARAMETERS,
}


@dataclass(frozen=True)
class ConnectOptions:
    """A database URL split in what SQLAlchemy gets (``url``) and what the framework
    gives the driver itself."""

    url: str
    ssl: DriverSsl = None
    pgbouncer: bool = False
    server_settings: tuple[tuple[str, str], ...] = ()
    connect_timeout: float | None = None

    @property
    def tls_required(self) -> bool:
        """True when no connection may be made without TLS (``sslmode=require`` or
        stronger, or any MySQL TLS parameter)."""
        return isinstance(self.ssl, ssl.SSLContext)

    def connect_args(self) -> dict[str, Any]:
        """The driver's connect arguments these options add."""
        args: dict[str, Any] = {} if self.ssl is None else {"ssl": self.ssl}
        if self.pgbouncer:
            args.update(pgbouncer.CONNECT_ARGS)
        if self.server_settings:
            args["server_settings"] = dict(self.server_settings)
        if self.connect_timeout is not None:
            args["timeout"] = self.connect_timeout
        return args


def read(url: str) -> ConnectOptions:
    """Take the framework's parameters out of ``url``; ``ValueError`` naming a mistake
    (never the URL: it may hold a password)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    ours = _OURS.get(backend)
    if ours is None:
        return ConnectOptions(url)
    query = {name: _one(name, value) for name, value in parsed.query.items()}
    _refuse_strangers(backend, query)
    taken = {name: value for name, value in query.items() if name in ours}
    rest = parsed.difference_update_query(taken)
    if backend == "mysql":
        return ConnectOptions(_render(rest), mysql_ssl(taken))
    if "ssl" in query and "sslmode" in query:
        raise ValueError("the database URL gives both ssl and sslmode; keep sslmode")
    libpq = {name: value for name, value in query.items() if name in _LIBPQ}
    rest = rest.difference_update_query(libpq)
    return ConnectOptions(
        _render(rest),
        postgresql_ssl(taken),
        _pgbouncer(taken.get(PGBOUNCER)),
        _server_settings(libpq),
        _seconds("connect_timeout", libpq.get("connect_timeout")),
    )


# libpq's parameters that asyncpg takes in another form: application_name and options
# become server settings, connect_timeout the connect timeout.
_LIBPQ = ("application_name", "options", "connect_timeout")
# What asyncpg (and SQLAlchemy's dialect for it) take from the URL as they are.
_ASYNCPG = (
    "host",
    "prepared_statement_cache_size",
    "target_session_attrs",
    "passfile",
    "service",
    "servicefile",
    "krbsrvname",
    "gsslib",
)


def _server_settings(libpq: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """``application_name`` and each ``-c name=value`` of ``options`` (libpq's forms)."""
    found: dict[str, str] = {}
    if "application_name" in libpq:
        found["application_name"] = libpq["application_name"]
    words = libpq.get("options", "").split()
    while words:
        word = words.pop(0)
        setting = words.pop(0) if word == "-c" and words else word.removeprefix("-c")
        name, equals, value = setting.removeprefix("--").partition("=")
        if not (word.startswith(("-c", "--")) and equals and name):
            raise ValueError(
                "the database URL's options must be -c name=value settings (libpq's form)"
            )
        found[name.replace("-", "_")] = value
    return tuple(found.items())


def _seconds(name: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"the database URL's {name} is not a number of seconds") from None
    if seconds <= 0:
        raise ValueError(f"the database URL's {name} must be more than 0 seconds")
    return seconds


def _one(name: str, value: str | tuple[str, ...]) -> str:
    if isinstance(value, tuple):
        raise ValueError(f"the database URL gives {name} more than once")
    return value


def _refuse_strangers(backend: str, query: dict[str, str]) -> None:
    """A TLS parameter we do not read would reach the driver and fail at the first
    connection (or, worse, be ignored): name it now."""
    known = _OURS[backend] + (("ssl",) if backend == "postgresql" else ())
    for name in query:
        if name.startswith("ssl") and name not in known:
            names = POSTGRESQL_PARAMETERS if backend == "postgresql" else MYSQL_PARAMETERS
            kind = "PostgreSQL" if backend == "postgresql" else "MySQL/MariaDB"
            raise ValueError(
                f"the database URL's {name} is not read; {kind} URLs take {', '.join(names)}"
            )
    if PGBOUNCER in query and backend != "postgresql":
        raise ValueError("pgbouncer=true is for PostgreSQL URLs only")
    if backend != "postgresql":
        return
    for name in query:
        if name not in (*known, *_LIBPQ, *_ASYNCPG):
            # asyncpg would refuse it at every connection, a batch's included.
            raise ValueError(
                f"the database URL's {name} is not read by the PostgreSQL driver (asyncpg); "
                f"PostgreSQL URLs take {', '.join((*known, *_LIBPQ, *_ASYNCPG))}"
            )


def _pgbouncer(value: str | None) -> bool:
    if value is None or value.lower() in ("false", "0", "no", "off"):
        return False
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    raise ValueError(f"pgbouncer must be true or false, got {value!r}")


def _render(url: Any) -> str:
    return str(url.render_as_string(hide_password=False))
