"""A database URL's TLS parameters and ``pgbouncer=true`` become the driver's arguments.

Contract (``app.db.connect_options``, ``app.db.tls``): libpq's ``sslmode``,
``sslrootcert``, ``sslcert``, ``sslkey``, ``sslpassword`` on a PostgreSQL URL and
``ssl_ca``, ``ssl_cert``, ``ssl_key``, ``ssl_verify_cert``, ``ssl_verify_identity`` on a
MySQL/MariaDB URL leave the URL SQLAlchemy gets and become ``ssl=``: an ``SSLContext``
that checks what the mode says (``require``: nothing unless a CA is given,
``verify-ca``: the chain, ``verify-full``: the chain and the host name), or asyncpg's
mode for ``disable``, ``allow`` and ``prefer``. ``pgbouncer=true`` turns statement
caching off and names every statement the unnamed one. A mistake (an unknown mode, a
file that cannot be read, a parameter nobody reads) is a ``ValueError`` at settings
validation naming the parameter, never the URL's password or ``sslpassword``; ``shown``
masks both.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.db import connect_options
from app.db.urls import normalise_database_url, shown
from app.demo.certificates import CertificateAuthority
from app.settings import Settings, describe

PG = "postgresql+asyncpg://app:s3cret@db.example:5432/orders"
MY = "mysql+aiomysql://app:s3cret@db.example:3306/orders"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    """A CA, and (``client``) a client certificate whose key is encrypted with ``kp``."""
    authority = CertificateAuthority(tmp_path_factory.mktemp("ca"))
    authority.issue("client", client=True, key_password="kp")
    return authority


def test_without_tls_parameters_the_url_passes_unchanged() -> None:
    asked = connect_options.read(f"{PG}?target_session_attrs=any")
    assert (asked.url, asked.ssl, asked.pgbouncer) == (
        f"{PG}?target_session_attrs=any",
        None,
        False,
    )
    assert asked.connect_args() == {}


@pytest.mark.parametrize(
    ("query", "verify", "check_hostname"),
    [
        ("sslmode=require", ssl.CERT_NONE, False),
        ("sslmode=require&sslrootcert={ca}", ssl.CERT_REQUIRED, False),
        ("sslmode=verify-ca&sslrootcert={ca}", ssl.CERT_REQUIRED, False),
        ("sslmode=verify-full&sslrootcert={ca}", ssl.CERT_REQUIRED, True),
        ("sslmode=verify-full&sslrootcert=system", ssl.CERT_REQUIRED, True),
    ],
)
def test_postgresql_modes_that_require_tls_give_a_context(
    ca: CertificateAuthority, query: str, verify: ssl.VerifyMode, check_hostname: bool
) -> None:
    asked = connect_options.read(f"{PG}?{query.format(ca=ca.cert)}&target_session_attrs=any")
    assert asked.url == f"{PG}?target_session_attrs=any"
    assert isinstance(asked.ssl, ssl.SSLContext)
    assert (asked.ssl.verify_mode, asked.ssl.check_hostname) == (verify, check_hostname)
    assert asked.tls_required
    assert asked.connect_args() == {"ssl": asked.ssl}


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer"])
def test_postgresql_modes_that_do_not_require_tls_go_to_asyncpg_as_they_are(mode: str) -> None:
    asked = connect_options.read(f"{PG}?sslmode={mode}")
    assert (asked.url, asked.ssl, asked.tls_required) == (PG, mode, False)


def test_a_client_certificate_with_an_encrypted_key_loads(ca: CertificateAuthority) -> None:
    client = ca.folder / "client"
    query = (
        f"sslmode=verify-full&sslrootcert={ca.cert}&sslcert={client}.crt"
        f"&sslkey={client}.key&sslpassword=kp"
    )
    asked = connect_options.read(f"{PG}?{query}")
    assert isinstance(asked.ssl, ssl.SSLContext)
    assert asked.url == PG


@pytest.mark.parametrize(
    ("query", "verify", "check_hostname"),
    [
        ("ssl_ca={ca}", ssl.CERT_REQUIRED, False),
        ("ssl_ca={ca}&ssl_verify_identity=true", ssl.CERT_REQUIRED, True),
        ("ssl_ca={ca}&ssl_verify_cert=false", ssl.CERT_NONE, False),
        ("ssl_verify_cert=false", ssl.CERT_NONE, False),
        ("ssl_verify_cert=true", ssl.CERT_REQUIRED, False),
    ],
)
def test_mysql_parameters_give_a_context(
    ca: CertificateAuthority, query: str, verify: ssl.VerifyMode, check_hostname: bool
) -> None:
    asked = connect_options.read(f"{MY}?{query.format(ca=ca.cert)}&charset=utf8mb4")
    assert asked.url == f"{MY}?charset=utf8mb4"
    assert isinstance(asked.ssl, ssl.SSLContext)
    assert (asked.ssl.verify_mode, asked.ssl.check_hostname) == (verify, check_hostname)


def test_pgbouncer_turns_prepared_statements_off() -> None:
    asked = connect_options.read(f"{PG}?pgbouncer=true&sslmode=require")
    assert asked.url == PG
    args = asked.connect_args()
    assert args["statement_cache_size"] == 0
    assert args["prepared_statement_cache_size"] == 0
    assert args["prepared_statement_name_func"]() == ""  # asyncpg's unnamed statement
    assert isinstance(args["ssl"], ssl.SSLContext)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            f"{PG}?sslmode=verify_full",
            "sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full, "
            "got 'verify_full'",
        ),
        (f"{PG}?sslmode=verify-full&sslrootcert=/nowhere/ca.pem", "sslrootcert: cannot read "),
        (f"{PG}?sslmode=verify-full&sslrootcert={__file__}", "holds no PEM certificate"),
        (f"{PG}?sslrootcert={__file__}", "sslrootcert needs sslmode=require, verify-ca or"),
        (f"{PG}?sslmode=prefer&sslcert=/x.crt", "sslcert needs sslmode=require"),
        (f"{PG}?sslmode=require&sslkey=/x.key", "sslkey needs sslcert"),
        (f"{PG}?sslcrl=/x.crl", "sslcrl is not read; PostgreSQL URLs take sslmode, "),
        (f"{PG}?ssl=require&sslmode=require", "both ssl and sslmode"),
        (f"{PG}?pgbouncer=maybe", "pgbouncer must be true or false"),
        (f"{MY}?ssl_ca=/nowhere/ca.pem", "ssl_ca: cannot read /nowhere/ca.pem"),
        (f"{MY}?ssl_verify_cert=sometimes", "ssl_verify_cert must be true or false"),
        (f"{MY}?ssl_verify_cert=false&ssl_verify_identity=true", "needs ssl_verify_cert=true"),
        (f"{MY}?ssl_capath=/etc/ssl", "ssl_capath is not read; MySQL/MariaDB URLs take ssl_ca"),
        (f"{MY}?pgbouncer=true", "pgbouncer=true is for PostgreSQL URLs only"),
    ],
)
def test_a_mistake_names_the_parameter_not_the_password(url: str, says: str) -> None:
    with pytest.raises(ValueError) as raised:
        normalise_database_url(url)
    assert says in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_a_wrong_key_password_is_named_and_not_shown(ca: CertificateAuthority) -> None:
    client = ca.folder / "client"
    url = f"{PG}?sslmode=require&sslcert={client}.crt&sslkey={client}.key&sslpassword=not-kp-9"
    with pytest.raises(ValueError, match="key's password is wrong") as raised:
        normalise_database_url(url)
    assert "not-kp-9" not in str(raised.value)


def test_the_settings_name_the_mistake_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:s3cret@db/orders?sslmode=on")
    with pytest.raises(ValidationError) as raised:
        Settings()
    [line] = describe(raised.value)
    assert line.startswith("DATABASE_URL: Value error, sslmode must be one of disable, "), line
    assert "s3cret" not in line


def test_a_printed_url_masks_both_passwords(tmp_path: Path) -> None:
    printed = shown(f"{PG}?sslmode=require&sslpassword=keypass")
    assert "s3cret" not in printed
    assert "keypass" not in printed
    assert "sslmode=require" in printed
