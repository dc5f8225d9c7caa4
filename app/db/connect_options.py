"""The parameters of a database URL that are the framework's to read, not SQLAlchemy's.

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
    return ConnectOptions(_render(rest), postgresql_ssl(taken), _pgbouncer(taken.get(PGBOUNCER)))


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


def _pgbouncer(value: str | None) -> bool:
    if value is None or value.lower() in ("false", "0", "no", "off"):
        return False
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    raise ValueError(f"pgbouncer must be true or false, got {value!r}")


def _render(url: Any) -> str:
    return str(url.render_as_string(hide_password=False))
