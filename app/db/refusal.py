"""A database that refuses the login or the TLS its URL asks for is a mistake to name at
start, in one line.

An unreachable database is an outage: the worker and the relay wait for it, retrying in
place. A login the server refuses (a wrong password or user), a certificate that is not
trusted, or that does not name the host, or a server that offers no TLS, will not change
by waiting: ``check_database`` makes one connection at start, as every later one will be
made, and raises ``DatabaseRefused`` naming what failed and, for TLS, the URL parameter
to look at. ``refusal`` gives the same line to a command that met the error on its own
connection. (Once running, a refused login is an outage like any other: a password
rotated under a running worker pauses it, see ``app.pipeline.classify``.)
"""

from __future__ import annotations

import asyncio
import ssl

from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from app.certificate_words import certificate_refused
from app.db.engine import create_engine
from app.db.error_code import error_code
from app.db.timeouts import DbTimeouts
from app.errors import ConfigurationError, DatabaseRefused

_CA = {"postgresql": "sslrootcert", "mysql": "ssl_ca"}
_NAME_CHECK = {"postgresql": "use sslmode=verify-ca", "mysql": "set ssl_verify_identity=false"}
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}


def refusal(exc: BaseException, url: str) -> str | None:
    """The line naming why the database at ``url`` refused TLS in ``exc`` (None: not that)."""
    backend = make_url(url).get_backend_name()
    for cause in _chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = (cause.verify_message or cause.reason or "verify failed").rstrip(".")
            return certificate_refused(
                cause.verify_code,
                reason,
                misnamed=f"its certificate does not name the host ({reason}); connect by a "
                "name the certificate holds, or "
                f"{_NAME_CHECK.get(backend, 'drop the name check')}",
                untrusted=f"its certificate is not trusted ({reason}); check "
                f"{_CA.get(backend, 'the CA file')}",
            )
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake failed ({cause.reason or cause})"
        text = str(cause)
        if "rejected SSL upgrade" in text or "does not offer TLS" in text:
            return "the server does not offer TLS, which the database URL asks for"
        said = _login_refused(cause)
        if said is not None:
            if error_code(cause) == _MYSQL_DATABASE_DENIED:
                return (
                    f"it refused the database ({said}); check the database name in "
                    "DATABASE_URL, and that the user may use it"
                )
            return f"it refused the login ({said}); check the user and password of DATABASE_URL"
    return None


# PostgreSQL's invalid_authorization_specification and invalid_password; MySQL's and
# MariaDB's "access denied" to the database, for a password, and for the user's plugin.
_PG_LOGIN = {"28000", "28P01"}
_MYSQL_LOGIN = {1044, 1045, 1698}
# Of those, the database named: one that does not exist, or that the user may not use
# (MySQL and MariaDB answer both alike).
_MYSQL_DATABASE_DENIED = 1044
# PgBouncer refuses a client's login as a protocol_violation, in these words.
_PGBOUNCER_LOGIN = "08P01"
_PGBOUNCER_REFUSALS = ("authentication failed", "no such user")


def _login_refused(cause: BaseException) -> str | None:
    """The server's own words when ``cause`` is its refusal of the login, else None."""
    code = error_code(cause)
    if code in _PG_LOGIN or (
        code == _PGBOUNCER_LOGIN and any(said in str(cause) for said in _PGBOUNCER_REFUSALS)
    ):
        message = str(cause)
    elif code in _MYSQL_LOGIN and len(cause.args) >= 2:
        message = str(cause.args[1])
    else:
        return None
    return message.strip().splitlines()[0] if message.strip() else "access denied"


def where(url: str) -> str:
    """``host:port`` of ``url``, as a message may name it."""
    parsed = make_url(url)
    port = parsed.port or _DEFAULT_PORTS.get(parsed.get_backend_name())
    return f"{parsed.host or 'localhost'}:{port}"


async def check_database(url: str, timeouts: DbTimeouts) -> None:
    """Raise ``DatabaseRefused`` if the database refuses the login or the TLS ``url`` asks
    for; a database out of reach passes (the caller waits for it), and so does SQLite."""
    if make_url(url).get_backend_name() == "sqlite":
        return
    engine = create_engine(url, pool_size=1, timeouts=timeouts)
    try:
        async with asyncio.timeout(timeouts.connect + 1), engine.connect():
            pass
    except Exception as exc:
        line = refusal(exc, url)
        if line is not None:
            raise DatabaseRefused(
                f"cannot connect to the database at {where(url)}: {line}"
            ) from None
    finally:
        await engine.dispose()


async def check_schema(url: str, timeouts: DbTimeouts, table: str = "consumed_event") -> None:
    """Raise ``ConfigurationError`` if the database at ``url`` answers and has no ``table``
    (the framework's schema was never migrated there); one out of reach passes (the caller
    waits for it)."""
    engine = create_engine(url, pool_size=1, timeouts=timeouts)
    try:
        async with asyncio.timeout(timeouts.connect + 1), engine.connect() as conn:
            present = await conn.run_sync(lambda sync: inspect(sync).has_table(table))
    except Exception:
        return
    finally:
        await engine.dispose()
    if not present:
        raise ConfigurationError(
            f"the database at {where(url)} has no table {table}: its schema was never "
            "migrated; run python -m app.db.migrate (with HANDLER_MODULES set), or start "
            "with MIGRATE_ON_START=true"
        )


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (SQLAlchemy's ``orig``, ``__cause__``, ``__context__``)."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop(0)
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        pending += [getattr(current, "orig", None), current.__cause__, current.__context__]
    return seen
