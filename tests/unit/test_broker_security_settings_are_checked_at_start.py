"""The broker security settings are checked at start, one line per mistake, no secret shown.

Contract: ``BROKER_SECURITY_PROTOCOL`` (default ``PLAINTEXT``) and
``BROKER_SASL_MECHANISM`` are read in any case; a blank value is unset. A SASL protocol
needs a mechanism, a password mechanism (PLAIN, SCRAM) a username and password,
OAUTHBEARER a token provider that imports as an aiokafka ``AbstractTokenProvider``. A
setting its protocol or mechanism does not use is a mistake, not ignored: TLS files
given without ``SSL``/``SASL_SSL`` would otherwise leave every client on plaintext. TLS
files must exist and load: a CA file without a certificate, a key that does not belong
to its certificate, an encrypted key without its password or with a wrong one are each
named (and OpenSSL never prompts for a password). Each mistake is one line naming its
variable; a mistake that follows from another is not said twice; no line, and no
``repr`` of the settings, holds a password.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.demo.certificates import CertificateAuthority, Issued
from app.settings import Settings, describe

pytestmark = pytest.mark.usefixtures("settings_from_the_test_only")

SECRET = "s3cret-Pa55"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def client(ca: CertificateAuthority) -> Issued:
    """A client certificate whose key is encrypted with ``SECRET``."""
    return ca.issue("client", client=True, key_password=SECRET)


def mistakes(**settings: object) -> list[str]:
    with pytest.raises(ValidationError) as raised:
        Settings(**settings)  # type: ignore[arg-type]
    lines = describe(raised.value)
    assert SECRET not in "\n".join(lines)
    return lines


def test_plaintext_by_default_and_any_case_is_read() -> None:
    assert Settings().broker_security.protocol == "PLAINTEXT"
    security = Settings(
        broker_security_protocol="sasl_plaintext",
        broker_sasl_mechanism="scram-sha-256",
        broker_sasl_username="alice",
        broker_sasl_password=SECRET,
        broker_ssl_ca_file="  ",
    ).broker_security
    assert (security.protocol, security.mechanism, security.ca_file) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        None,
    )
    assert security.password == SECRET
    assert SECRET not in repr(security) + security.describe()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"broker_security_protocol": "TLS"},
            [
                "BROKER_SECURITY_PROTOCOL: Input should be 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT' "
                "or 'SASL_SSL'"
            ],
        ),
        (
            {"broker_security_protocol": "SASL_SSL"},
            ["BROKER_SASL_MECHANISM: required with BROKER_SECURITY_PROTOCOL=SASL_SSL"],
        ),
        (
            {"broker_security_protocol": "SASL_SSL", "broker_sasl_mechanism": "GSSAPI"},
            [
                "BROKER_SASL_MECHANISM: Input should be 'PLAIN', 'SCRAM-SHA-256', "
                "'SCRAM-SHA-512' or 'OAUTHBEARER'"
            ],
        ),
        (
            {
                "broker_sasl_mechanism": "PLAIN",
                "broker_sasl_username": "bob",
                "broker_sasl_password": SECRET,
            },
            [
                "BROKER_SASL_MECHANISM: set, but BROKER_SECURITY_PROTOCOL is PLAINTEXT: only used "
                "with SASL_PLAINTEXT or SASL_SSL (set the protocol, or unset this)"
            ],
        ),
        (
            {"broker_security_protocol": "SASL_SSL", "broker_sasl_mechanism": "SCRAM-SHA-512"},
            [
                "BROKER_SASL_USERNAME: required with BROKER_SASL_MECHANISM=SCRAM-SHA-512",
                "BROKER_SASL_PASSWORD: required with BROKER_SASL_MECHANISM=SCRAM-SHA-512",
            ],
        ),
        (
            {"broker_sasl_password": SECRET},
            [
                "BROKER_SASL_PASSWORD: only used with BROKER_SASL_MECHANISM PLAIN, SCRAM-SHA-256 "
                "or SCRAM-SHA-512"
            ],
        ),
        (
            {"broker_security_protocol": "SASL_SSL", "broker_sasl_mechanism": "OAUTHBEARER"},
            ["BROKER_SASL_OAUTH_TOKEN_PROVIDER: required with BROKER_SASL_MECHANISM=OAUTHBEARER"],
        ),
        (
            {
                "broker_security_protocol": "SASL_SSL",
                "broker_sasl_mechanism": "OAUTHBEARER",
                "broker_sasl_oauth_token_provider": "no_such_module:Provider",
            },
            [
                "BROKER_SASL_OAUTH_TOKEN_PROVIDER: cannot import no_such_module: No module named "
                "'no_such_module'"
            ],
        ),
        (
            {
                "broker_security_protocol": "SASL_SSL",
                "broker_sasl_mechanism": "OAUTHBEARER",
                "broker_sasl_oauth_token_provider": "app.msk_iam",
            },
            [
                "BROKER_SASL_OAUTH_TOKEN_PROVIDER: app has no msk_iam (app.msk_iam is a module: "
                "name its provider, as app.msk_iam:Name)"
            ],
        ),
        (
            {
                "broker_security_protocol": "SASL_SSL",
                "broker_sasl_mechanism": "OAUTHBEARER",
                "broker_sasl_oauth_token_provider": "os.path:join",
            },
            [
                "BROKER_SASL_OAUTH_TOKEN_PROVIDER: os.path:join is not an aiokafka "
                "AbstractTokenProvider (class or instance)"
            ],
        ),
        (
            {"broker_ssl_ca_file": "/etc/hostname"},
            [
                "BROKER_SSL_CA_FILE: set, but BROKER_SECURITY_PROTOCOL is PLAINTEXT: only used "
                "with SSL or SASL_SSL (set the protocol, or unset this)"
            ],
        ),
        (
            {"broker_security_protocol": "SSL", "broker_ssl_ca_file": "/no/such/ca.pem"},
            ["BROKER_SSL_CA_FILE: no file at /no/such/ca.pem"],
        ),
        (
            {"broker_security_protocol": "SASL_PLAINTEXT", "broker_ssl_check_hostname": False}
            | {"broker_sasl_mechanism": "PLAIN", "broker_sasl_username": "u"}
            | {"broker_sasl_password": "p"},
            [
                "BROKER_SSL_CHECK_HOSTNAME: set, but BROKER_SECURITY_PROTOCOL is SASL_PLAINTEXT: "
                "only used with SSL or SASL_SSL (set the protocol, or unset this)"
            ],
        ),
    ],
    ids=[
        "unknown-protocol",
        "sasl-without-mechanism",
        "unknown-mechanism",
        "sasl-without-sasl-protocol",
        "login-missing",
        "password-without-mechanism",
        "oauth-without-provider",
        "provider-not-importable",
        "provider-a-module",
        "provider-not-a-provider",
        "tls-file-without-tls",
        "missing-file",
        "hostname-check-off-without-tls",
    ],
)
def test_each_mistake_is_one_line_naming_its_variable(
    settings: dict[str, object], expected: list[str]
) -> None:
    assert mistakes(**settings) == expected


def test_tls_files_are_loaded_at_start(
    ca: CertificateAuthority, client: Issued, tmp_path: Path
) -> None:
    tls = {"broker_security_protocol": "SSL", "broker_ssl_ca_file": str(ca.cert)}
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    other = ca.issue("other", client=True)

    assert mistakes(**{**tls, "broker_ssl_ca_file": str(not_pem)})[0].startswith(
        "BROKER_SSL_CA_FILE: no CA certificate could be read"
    )
    assert mistakes(
        **tls, broker_ssl_cert_file=str(client.cert), broker_ssl_key_file=str(client.key)
    ) == ["BROKER_SSL_KEY_FILE: the private key is encrypted; set BROKER_SSL_KEY_PASSWORD"]
    assert mistakes(
        **tls,
        broker_ssl_cert_file=str(client.cert),
        broker_ssl_key_file=str(client.key),
        broker_ssl_key_password="wrong",
    ) == ["BROKER_SSL_KEY_PASSWORD: does not decrypt the private key"]
    assert mistakes(
        **tls,
        broker_ssl_cert_file=str(other.cert),
        broker_ssl_key_file=str(client.key),
        broker_ssl_key_password=SECRET,
    ) == ["BROKER_SSL_KEY_FILE: the private key does not belong to the certificate"]
    [no_key] = mistakes(
        **tls, broker_ssl_cert_file=str(other.cert), broker_ssl_key_file=str(ca.cert)
    )  # the CA's certificate given as the key: no key in it
    assert no_key.startswith("BROKER_SSL_KEY_FILE: no PEM certificate and private key could be")
    assert not no_key.endswith("None)"), no_key
    assert mistakes(**tls, broker_ssl_key_file=str(client.key), broker_ssl_key_password=SECRET) == [
        "BROKER_SSL_KEY_FILE: set without BROKER_SSL_CERT_FILE, the certificate it belongs to"
    ]
    # A certificate file that holds its (unencrypted) key too needs no key file.
    settings = Settings(**tls, broker_ssl_cert_file=str(other.chain))  # type: ignore[arg-type]
    context = settings.broker_security.ssl_context()
    assert context is not None and context.check_hostname


def test_hostname_checks_can_be_turned_off_but_never_the_chains(ca: CertificateAuthority) -> None:
    settings = Settings(
        broker_security_protocol="SSL",
        broker_ssl_ca_file=str(ca.cert),
        broker_ssl_check_hostname=False,
    )
    context = settings.broker_security.ssl_context()
    assert context is not None
    assert not context.check_hostname
    assert context.verify_mode.name == "CERT_REQUIRED"
