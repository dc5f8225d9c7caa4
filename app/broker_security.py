"""How every Kafka client authenticates and encrypts, from the broker security settings.

``BrokerSecurity`` (``Settings.broker_security``, checked by ``app.broker_settings``)
turns them into what aiokafka's producer, consumer, admin client and connection take
(``client_options``): the protocol, the SASL mechanism and login or token provider, and
a TLS context that verifies the broker's certificate and name and holds the client
certificate. ``app.kafka_clients`` hands them to every client, faust's app included.
The TLS context and token provider are also made once at start, by the settings' checks,
so that a file that does not load or a provider that cannot be made is found then.
"""

from __future__ import annotations

import importlib
import importlib.util
import ssl
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # aiokafka is imported when a client is made, not with the settings
    from aiokafka.abc import AbstractTokenProvider

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def load_token_provider(path: str) -> AbstractTokenProvider:
    """The token provider ``path`` names (``package.module:Name`` or ``package.module.Name``):
    an ``AbstractTokenProvider`` subclass, made with no arguments, or an instance.
    ``ValueError`` saying what is wrong."""
    from aiokafka.abc import AbstractTokenProvider

    module_name, _, name = path.rpartition(":") if ":" in path else path.rpartition(".")
    if not module_name or not name:
        raise ValueError("expected package.module:Name")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name}: {exc}") from None
    except AttributeError:
        found = None
    if found is None or isinstance(found, ModuleType):
        if ":" not in path and importlib.util.find_spec(path) is not None:
            raise ValueError(
                f"{module_name} has no {name} ({path} is a module: name its provider, "
                f"as {path}:Name)"
            ) from None
        if found is None:
            raise ValueError(f"{module_name} has no {name}") from None
    if isinstance(found, type) and issubclass(found, AbstractTokenProvider):
        try:
            found = found()
        except Exception as exc:
            raise ValueError(f"{path}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(found, AbstractTokenProvider):
        raise ValueError(f"{path} is not an aiokafka AbstractTokenProvider (class or instance)")
    return found


def ssl_context(
    ca_file: str | None,
    cert_file: str | None,
    key_file: str | None,
    key_password: str | None,
    check_hostname: bool,
) -> ssl.SSLContext:
    """The TLS context of every client: the broker's certificate verified against
    ``ca_file`` (the system's CAs when unset), the client certificate when given.
    ``ValueError`` naming the variable at fault, never quoting the key's password."""
    from aiokafka.helpers import create_ssl_context

    try:
        context = create_ssl_context(cafile=ca_file)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"BROKER_SSL_CA_FILE: no CA certificate could be read ({exc})") from None
    context.check_hostname = check_hostname  # the chain is verified either way
    if cert_file:
        key_at = key_file or cert_file
        encrypted = _encrypted_key(key_at)
        if encrypted and key_password is None:
            variable = "BROKER_SSL_KEY_FILE" if key_file else "BROKER_SSL_CERT_FILE"
            raise ValueError(
                f"{variable}: the private key is encrypted; set BROKER_SSL_KEY_PASSWORD"
            )
        try:
            # A callable, so that OpenSSL never prompts on the terminal for a password.
            context.load_cert_chain(cert_file, key_file, lambda: key_password or "")
        except ssl.SSLError as exc:
            if exc.reason == "KEY_VALUES_MISMATCH":
                raise ValueError(
                    "BROKER_SSL_KEY_FILE: the private key does not belong to the certificate"
                ) from None
            if encrypted:
                raise ValueError(
                    "BROKER_SSL_KEY_PASSWORD: does not decrypt the private key"
                ) from None
            variable = "BROKER_SSL_KEY_FILE" if key_file else "BROKER_SSL_CERT_FILE"
            why = exc.reason or exc.strerror or "no PEM private key in it"
            raise ValueError(
                f"{variable}: no PEM certificate and private key could be read "
                f"(from {cert_file}{f' and {key_file}' if key_file else ''}: {why})"
            ) from None
        except OSError as exc:
            raise ValueError(f"BROKER_SSL_CERT_FILE: cannot be read ({exc})") from None
    return context


def _encrypted_key(path: str) -> bool:
    """Whether the PEM file at ``path`` holds an encrypted private key (PKCS#8 or legacy)."""
    try:
        with open(path, "rb") as pem:
            text = pem.read(1 << 20)
    except OSError:
        return False
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text


@dataclass(frozen=True, slots=True)
class BrokerSecurity:
    """Valid security settings (``Settings.broker_security``), as client options."""

    protocol: Protocol = "PLAINTEXT"
    mechanism: Mechanism | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token_provider: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        """Whether the connection is encrypted (``SSL`` or ``SASL_SSL``)."""
        return self.protocol in TLS_PROTOCOLS

    def ssl_context(self) -> ssl.SSLContext | None:
        """A new TLS context, or None without TLS."""
        if not self.tls:
            return None
        return ssl_context(
            self.ca_file, self.cert_file, self.key_file, self.key_password, self.check_hostname
        )

    def client_options(self) -> dict[str, Any]:
        """The keyword arguments of aiokafka's producer, consumer, admin client and
        connection (``security_protocol``, ``ssl_context``, ``sasl_*``)."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        if self.mechanism == "OAUTHBEARER":
            assert self.token_provider is not None
            options["sasl_mechanism"] = self.mechanism
            options["sasl_oauth_token_provider"] = load_token_provider(self.token_provider)
        elif self.mechanism is not None:
            options["sasl_mechanism"] = self.mechanism
            options["sasl_plain_username"] = self.username
            options["sasl_plain_password"] = self.password
        return options

    def describe(self) -> str:
        """For a log line: the protocol, mechanism and user, never a secret."""
        parts: list[str] = [self.protocol]
        if self.mechanism:
            parts.append(self.mechanism)
        if self.username:
            parts.append(f"as {self.username}")
        if self.cert_file:
            parts.append("with a client certificate")
        return " ".join(parts)
