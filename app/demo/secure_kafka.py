"""An Apache Kafka with the three secured client listeners the tests connect through.

- ``SASL_SSL``: TLS, then SASL SCRAM-SHA-512 (users created when the node is formatted);
- ``SSL``: TLS with client certificates (``ssl.client.auth=required``);
- ``SASL_PLAINTEXT``: SASL PLAIN without TLS.

Certificates and passwords are made for each broker (``app.demo.certificates``): a CA,
the broker's certificate for ``127.0.0.1`` and ``localhost``, a client certificate
whose key is encrypted. ``settings(listener)`` is the environment a worker, relay or
command needs to connect through one of them. The nodes speak PLAINTEXT among
themselves, on a listener the tests use only to set up topics.
"""

from __future__ import annotations

import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from app.demo.certificates import CertificateAuthority, Issued
from app.demo.kafka import KafkaCluster, Listener
from app.demo.lifecycle import Launched

SASL_SSL = "SASL_SSL"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
LISTENERS = (SASL_SSL, SSL, SASL_PLAINTEXT)
SCRAM = "SCRAM-SHA-512"
SERVER_HOSTS = ("127.0.0.1", "localhost")
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True)
class Credentials:
    """One SASL user."""

    username: str
    password: str = field(repr=False)


@dataclass
class SecureKafka(Launched):
    """One Kafka node with the three secured listeners; use as a context manager."""

    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kafka-tls-")))
    log_path: Path | None = None
    scram_user: Credentials = field(
        default_factory=lambda: Credentials("alice", secrets.token_urlsafe(12))
    )
    plain_user: Credentials = field(
        default_factory=lambda: Credentials("bob", secrets.token_urlsafe(12))
    )
    client_key_password: str = field(default_factory=lambda: secrets.token_urlsafe(12), repr=False)
    ca: CertificateAuthority = field(init=False)
    server: Issued = field(init=False)
    client: Issued = field(init=False)
    cluster: KafkaCluster = field(init=False)

    def __post_init__(self) -> None:
        self.ca = CertificateAuthority(self.folder / "ca")
        self.server = self.ca.issue("broker", SERVER_HOSTS)
        self.client = self.ca.issue("client", client=True, key_password=self.client_key_password)
        keystore = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.server.chain),
        }
        plain_login = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{self.plain_user.username}="{self.plain_user.password}";'
        )
        listeners = (
            Listener(
                SASL_SSL,
                SASL_SSL,
                {
                    **keystore,
                    "sasl.enabled.mechanisms": SCRAM,
                    f"{SCRAM.lower()}.sasl.jaas.config": _SCRAM_LOGIN,
                },
            ),
            Listener(
                SSL,
                SSL,
                {
                    **keystore,
                    "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": str(self.ca.cert),
                    "ssl.client.auth": "required",
                },
            ),
            Listener(
                SASL_PLAINTEXT,
                SASL_PLAINTEXT,
                {"sasl.enabled.mechanisms": "PLAIN", "plain.sasl.jaas.config": plain_login},
            ),
        )
        user = self.scram_user
        self.cluster = KafkaCluster(
            size=1,
            log_dir=self.log_path.parent if self.log_path else None,
            listeners=listeners,
            scram_users=(f"{SCRAM}=[name={user.username},password={user.password}]",),
        )

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener (the tests' own set-up: topics, records)."""
        return self.cluster.bootstrap

    @property
    def url(self) -> str:
        """The PLAINTEXT listener's ``BROKER_URL``."""
        return self.cluster.url

    def settings(self, listener: str, host: str = "127.0.0.1") -> dict[str, str]:
        """The environment that connects a worker, relay or command through ``listener``."""
        url = self.cluster.url_of(listener, host)
        tls = {"BROKER_SSL_CA_FILE": str(self.ca.cert)}
        if listener == SASL_SSL:
            return {
                "BROKER_URL": url,
                "BROKER_SECURITY_PROTOCOL": SASL_SSL,
                "BROKER_SASL_MECHANISM": SCRAM,
                "BROKER_SASL_USERNAME": self.scram_user.username,
                "BROKER_SASL_PASSWORD": self.scram_user.password,
                **tls,
            }
        if listener == SSL:
            return {
                "BROKER_URL": url,
                "BROKER_SECURITY_PROTOCOL": SSL,
                "BROKER_SSL_CERT_FILE": str(self.client.cert),
                "BROKER_SSL_KEY_FILE": str(self.client.key),
                "BROKER_SSL_KEY_PASSWORD": self.client_key_password,
                **tls,
            }
        if listener == SASL_PLAINTEXT:
            return {
                "BROKER_URL": url,
                "BROKER_SECURITY_PROTOCOL": SASL_PLAINTEXT,
                "BROKER_SASL_MECHANISM": "PLAIN",
                "BROKER_SASL_USERNAME": self.plain_user.username,
                "BROKER_SASL_PASSWORD": self.plain_user.password,
            }
        raise ValueError(f"no listener {listener!r}: one of {', '.join(LISTENERS)}")

    def start(self, timeout: float = 90.0) -> Self:
        """Format and start the node; returns once it is ready."""
        self.cluster.start(timeout)
        return self

    def stop(self) -> None:
        """Stop the node; its data goes with it (the certificates stay in ``folder``)."""
        self.cluster.stop()
