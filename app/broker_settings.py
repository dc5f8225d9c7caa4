"""The broker security settings, checked at start: one line per mistake, never a secret.

``BROKER_SECURITY_PROTOCOL``, ``BROKER_SASL_*`` and ``BROKER_SSL_*`` are fields of the one
``Settings`` object (mixed in from ``BrokerSecuritySettings``). Each is checked against
the ones before it, and a mistake that follows from another is not said again. No
message quotes a value (it may be a secret). A setting its protocol or mechanism does
not use is a mistake too: TLS files given without a TLS protocol must never leave a
client quietly on plaintext. The files are loaded and the token provider is made at
start (``app.broker_security``), so that what cannot work is said before a connection.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.broker_security import (
    TLS_PROTOCOLS,
    BrokerSecurity,
    Mechanism,
    Protocol,
    load_token_provider,
)

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class BrokerSecuritySettings(BaseModel):
    """How every Kafka client authenticates and encrypts (README, "Secured brokers")."""

    # Checked in this order, each against the ones before it: one mistake, one line.
    broker_security_protocol: Protocol = "PLAINTEXT"
    broker_sasl_mechanism: Mechanism | None = Field(default=None, validate_default=True)
    broker_sasl_username: str | None = Field(default=None, validate_default=True)
    broker_sasl_password: SecretStr | None = Field(default=None, validate_default=True)
    broker_sasl_oauth_token_provider: str | None = Field(default=None, validate_default=True)
    broker_ssl_ca_file: str | None = None
    broker_ssl_cert_file: str | None = None
    broker_ssl_key_file: str | None = Field(default=None, validate_default=True)
    broker_ssl_key_password: SecretStr | None = Field(default=None, validate_default=True)
    broker_ssl_check_hostname: bool = True

    @field_validator(
        "broker_sasl_mechanism",
        "broker_sasl_username",
        "broker_sasl_password",
        "broker_sasl_oauth_token_provider",
        "broker_ssl_ca_file",
        "broker_ssl_cert_file",
        "broker_ssl_key_file",
        "broker_ssl_key_password",
        mode="before",
    )
    @classmethod
    def _blank_is_unset_too(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("broker_security_protocol", "broker_sasl_mechanism", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("broker_sasl_mechanism")
    @classmethod
    def _mechanism_fits(cls, value: str | None, info: ValidationInfo) -> str | None:
        if "broker_security_protocol" in info.data:
            _refuse(needs_mechanism(info.data["broker_security_protocol"], value))
        return value

    @field_validator("broker_sasl_username", "broker_sasl_password")
    @classmethod
    def _login_fits(cls, value: object, info: ValidationInfo) -> object:
        if "broker_sasl_mechanism" in info.data:
            mechanism = info.data["broker_sasl_mechanism"]
            _refuse(needs_password_login(mechanism, value is not None))
        return value

    @field_validator("broker_sasl_oauth_token_provider")
    @classmethod
    def _token_provider_fits(cls, value: str | None, info: ValidationInfo) -> str | None:
        if "broker_sasl_mechanism" in info.data:
            mechanism = info.data["broker_sasl_mechanism"]
            _refuse(needs_token_provider(mechanism, value is not None))
            if value is not None:
                try:
                    load_token_provider(value)
                except ValueError as exc:
                    _refuse(str(exc))
        return value

    @field_validator("broker_ssl_ca_file", "broker_ssl_cert_file", "broker_ssl_key_file")
    @classmethod
    def _tls_file_fits(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and "broker_security_protocol" in info.data:
            _refuse(tls_only(info.data["broker_security_protocol"]))
            _refuse(readable_file(value))
        if value is not None and info.field_name == "broker_ssl_key_file":
            if info.data.get("broker_ssl_cert_file", "") is None:
                _refuse("set without BROKER_SSL_CERT_FILE, the certificate it belongs to")
        return value

    @field_validator("broker_ssl_check_hostname")
    @classmethod
    def _hostname_check_fits(cls, value: bool, info: ValidationInfo) -> bool:
        # Turned off, it says the operator means TLS: under a plain protocol it would do nothing.
        if not value and "broker_security_protocol" in info.data:
            _refuse(tls_only(info.data["broker_security_protocol"]))
        return value

    @field_validator("broker_ssl_key_password")
    @classmethod
    def _key_password_fits(cls, value: SecretStr | None, info: ValidationInfo) -> object:
        alone = info.data.get("broker_ssl_key_file", "") is None  # else that one says it
        if value is not None and alone and info.data.get("broker_ssl_cert_file", "") is None:
            _refuse("set without BROKER_SSL_CERT_FILE, whose private key it decrypts")
        return value

    @model_validator(mode="after")
    def _tls_files_load(self) -> BrokerSecuritySettings:
        """The CA, certificate and key load (a wrong key password is found at start)."""
        try:
            self.broker_security.ssl_context()
        except ValueError as exc:
            raise PydanticCustomError("broker_tls", str(exc)) from None
        return self

    @property
    def broker_security(self) -> BrokerSecurity:
        """How every Kafka client authenticates and encrypts (``app.broker_security``)."""
        return BrokerSecurity(
            protocol=self.broker_security_protocol,
            mechanism=self.broker_sasl_mechanism,
            username=self.broker_sasl_username,
            password=_secret(self.broker_sasl_password),
            token_provider=self.broker_sasl_oauth_token_provider,
            ca_file=self.broker_ssl_ca_file,
            cert_file=self.broker_ssl_cert_file,
            key_file=self.broker_ssl_key_file,
            key_password=_secret(self.broker_ssl_key_password),
            check_hostname=self.broker_ssl_check_hostname,
        )


def _refuse(problem: str | None) -> None:
    """Raise ``problem`` as the field's one error (no "Value error," before it)."""
    if problem is not None:
        raise PydanticCustomError("setting", problem)


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def needs_mechanism(protocol: str, mechanism: str | None) -> str | None:
    """What is wrong with ``BROKER_SASL_MECHANISM`` under ``protocol``, or None."""
    if protocol in SASL_PROTOCOLS and mechanism is None:
        return f"required with BROKER_SECURITY_PROTOCOL={protocol}"
    if protocol not in SASL_PROTOCOLS and mechanism is not None:
        return _unused(protocol, "SASL_PLAINTEXT or SASL_SSL")
    return None


def needs_password_login(mechanism: str | None, given: bool) -> str | None:
    """What is wrong with ``BROKER_SASL_USERNAME`` / ``_PASSWORD`` under ``mechanism``."""
    if mechanism in PASSWORD_MECHANISMS and not given:
        return f"required with BROKER_SASL_MECHANISM={mechanism}"
    if mechanism not in PASSWORD_MECHANISMS and given:
        return "only used with BROKER_SASL_MECHANISM PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
    return None


def needs_token_provider(mechanism: str | None, given: bool) -> str | None:
    """What is wrong with ``BROKER_SASL_OAUTH_TOKEN_PROVIDER`` under ``mechanism``."""
    if mechanism == "OAUTHBEARER" and not given:
        return "required with BROKER_SASL_MECHANISM=OAUTHBEARER"
    if mechanism != "OAUTHBEARER" and given:
        return "only used with BROKER_SASL_MECHANISM=OAUTHBEARER"
    return None


def tls_only(protocol: str) -> str | None:
    """What is wrong with a ``BROKER_SSL_*`` file under ``protocol``, or None."""
    return None if protocol in TLS_PROTOCOLS else _unused(protocol, "SSL or SASL_SSL")


def readable_file(path: str) -> str | None:
    """Why ``path`` cannot be read, or None (the path is shown: it is no secret)."""
    if not os.path.isfile(path):
        return f"no file at {path}"
    if not os.access(path, os.R_OK):
        return f"{path} is not readable by this process"
    return None


def _unused(protocol: str, wanted: str) -> str:
    return (
        f"set, but BROKER_SECURITY_PROTOCOL is {protocol}: only used with {wanted} "
        "(set the protocol, or unset this)"
    )
