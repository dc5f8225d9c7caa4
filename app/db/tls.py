"""TLS to the database, asked for in its URL with the names its own clients use.

- PostgreSQL, libpq's: ``sslmode`` (``disable``, ``allow``, ``prefer``, ``require``,
  ``verify-ca``, ``verify-full``), ``sslrootcert`` (a CA file, or ``system``),
  ``sslcert``, ``sslkey``, ``sslpassword`` (the key's).
- MySQL/MariaDB, the MySQL clients': ``ssl_ca``, ``ssl_cert``, ``ssl_key``,
  ``ssl_verify_cert``, ``ssl_verify_identity``.

They become the driver's ``ssl=`` (an ``SSLContext``, or asyncpg's mode for ``allow`` and
``prefer``). The files are read here, when the settings are validated: an unreadable CA is
a mistake at start, not a failed connection at 3 a.m. A message names the parameter and
the file, never the URL (it may hold a password) nor ``sslpassword``.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

POSTGRESQL_PARAMETERS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword")
MYSQL_PARAMETERS = ("ssl_ca", "ssl_cert", "ssl_key", "ssl_verify_cert", "ssl_verify_identity")
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_VERIFYING = ("require", "verify-ca", "verify-full")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

DriverSsl = ssl.SSLContext | str | None
"""What the driver's ``ssl=`` gets; None: the URL asks nothing (the driver's default)."""


def postgresql_ssl(query: Mapping[str, str]) -> DriverSsl:
    """asyncpg's ``ssl=`` for libpq's parameters in ``query``; ``ValueError`` for a mistake.

    ``require`` encrypts without checking the server's certificate, unless ``sslrootcert``
    is given (then, as libpq does, it checks it like ``verify-ca``); ``verify-ca`` checks
    it against ``sslrootcert`` (default: the system's CAs); ``verify-full`` also checks
    that it names the host of the URL. ``allow`` and ``prefer`` never check anything.
    """
    mode = query.get("sslmode")
    files = [name for name in ("sslrootcert", "sslcert", "sslkey") if query.get(name)]
    if mode is None and not files:
        return None
    if mode is not None and mode not in SSLMODES:
        raise ValueError(f"sslmode must be one of {', '.join(SSLMODES)}, got {mode!r}")
    if files and mode not in _VERIFYING:
        raise ValueError(
            f"{files[0]} needs sslmode=require, verify-ca or verify-full "
            f"(with sslmode={mode or 'prefer, the default,'} it would not be used)"
        )
    if mode in ("disable", "allow", "prefer"):
        return mode
    rootcert = query.get("sslrootcert")
    verify = mode != "require" or bool(rootcert)
    context = _context(
        ca=rootcert if rootcert != "system" else None,
        ca_name="sslrootcert",
        verify=verify,
        check_hostname=mode == "verify-full",
    )
    _client_certificate(
        context, query.get("sslcert"), query.get("sslkey"), query.get("sslpassword"), "sslcert"
    )
    return context


def mysql_ssl(query: Mapping[str, str]) -> ssl.SSLContext | None:
    """aiomysql's ``ssl=`` for the TLS parameters in ``query``; ``ValueError`` for a mistake.

    Any of them turns TLS on. ``ssl_verify_cert`` (default: true when ``ssl_ca`` is given)
    checks the server's certificate against ``ssl_ca`` (default: the system's CAs);
    ``ssl_verify_identity`` (default false) also checks that it names the host.
    """
    if not any(name in query for name in MYSQL_PARAMETERS):
        return None
    ca = query.get("ssl_ca") or None
    verify = _flag(query, "ssl_verify_cert", default=ca is not None)
    identity = _flag(query, "ssl_verify_identity", default=False)
    if identity and not verify:
        raise ValueError("ssl_verify_identity=true needs ssl_verify_cert=true")
    context = _context(ca=ca, ca_name="ssl_ca", verify=verify, check_hostname=identity)
    _client_certificate(context, query.get("ssl_cert"), query.get("ssl_key"), None, "ssl_cert")
    return context


def _context(ca: str | None, ca_name: str, verify: bool, check_hostname: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if ca is None:
        context.load_default_certs()
        return context
    try:
        context.load_verify_locations(cafile=ca)
    except ssl.SSLError:  # an OSError too: first
        raise ValueError(f"{ca_name}: {ca} holds no PEM certificate") from None
    except OSError as exc:
        raise ValueError(f"{ca_name}: cannot read {ca} ({exc.strerror or exc})") from None
    return context


def _client_certificate(
    context: ssl.SSLContext,
    cert: str | None,
    key: str | None,
    password: str | None,
    cert_name: str,
) -> None:
    key_name = cert_name.replace("cert", "key")
    if not cert:
        if key:
            raise ValueError(f"{key_name} needs {cert_name} (the certificate of that key)")
        return
    try:
        # A password always: without one, OpenSSL would prompt for it on the terminal.
        context.load_cert_chain(cert, keyfile=key or None, password=password or "")
    except OSError as exc:
        if isinstance(exc, ssl.SSLError):
            raise ValueError(
                f"{cert_name} and {key_name}: {cert} and {key or 'its key'} are not a PEM "
                "certificate and its key (or the key's password is wrong)"
            ) from None
        raise ValueError(
            f"{cert_name} or {key_name}: cannot read {exc.filename or cert} ({exc.strerror or exc})"
        ) from None


def _flag(query: Mapping[str, str], name: str, default: bool) -> bool:
    value = query.get(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")
