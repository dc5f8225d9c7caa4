"""An Apache Kafka that authorizes: KRaft's ``StandardAuthorizer``, nothing allowed without an ACL.

One client listener, ``SASL_PLAINTEXT`` with PLAIN, knows the ``users`` given (each its
own principal, ``User:<name>``); ``allow.everyone.if.no.acl.found=false``, so a user
may do only what an ACL grants it. The PLAINTEXT listener (the nodes' own, and the
tests' set-up: topics, records, ACLs) is ``User:ANONYMOUS``, a super user, as is
``admin``. ``grant`` runs Kafka's own ``AclCommand`` from the jars.
For tests and development only.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field

from app.demo.kafka import KafkaCluster, Listener
from app.demo.kafka_jars import java_binary, kafka_classpath

SASL_PLAINTEXT = "SASL_PLAINTEXT"
SUPER_USERS = ("ANONYMOUS", "admin")
ACL_COMMAND_TIMEOUT_SECONDS = 120


@dataclass
class AclKafka(KafkaCluster):
    """One Kafka node with ACLs enforced on a ``SASL_PLAINTEXT`` (PLAIN) listener; a
    ``KafkaCluster`` (``start``, ``stop``, a context manager) with users and ACLs."""

    users: tuple[str, ...] = ("worker",)
    passwords: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        names = (*SUPER_USERS[1:], *self.users)
        self.passwords = {name: secrets.token_urlsafe(12) for name in names}
        logins = " ".join(f'user_{name}="{password}"' for name, password in self.passwords.items())
        plain = "org.apache.kafka.common.security.plain.PlainLoginModule required"
        self.listeners = (
            Listener(
                SASL_PLAINTEXT,
                SASL_PLAINTEXT,
                {
                    "sasl.enabled.mechanisms": "PLAIN",
                    "plain.sasl.jaas.config": f"{plain} {logins};",
                },
            ),
        )
        self.properties = {
            **self.properties,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": ";".join(f"User:{name}" for name in SUPER_USERS),
        }
        super().__post_init__()

    def settings(self, user: str) -> dict[str, str]:
        """The environment that connects a worker, relay or command as ``user``."""
        return {
            "BROKER_URL": self.url_of(SASL_PLAINTEXT),
            "BROKER_SECURITY_PROTOCOL": SASL_PLAINTEXT,
            "BROKER_SASL_MECHANISM": "PLAIN",
            "BROKER_SASL_USERNAME": user,
            "BROKER_SASL_PASSWORD": self.passwords[user],
        }

    def grant(self, user: str, *options: str) -> None:
        """Add ACLs allowing ``user`` what ``options`` (``AclCommand``'s: ``--operation Read
        --topic orders``, ``--consumer --group g`` ...) say."""
        self._acls("--add", "--allow-principal", f"User:{user}", *options)

    def revoke(self, user: str, *options: str) -> None:
        """Remove the ACLs allowing ``user`` what ``options`` say (as for ``grant``)."""
        self._acls("--remove", "--force", "--allow-principal", f"User:{user}", *options)

    def _acls(self, *args: str) -> None:
        done = subprocess.run(
            [
                java_binary(),
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                kafka_classpath(),
                "org.apache.kafka.tools.AclCommand",
                "--bootstrap-server",
                self.bootstrap,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=ACL_COMMAND_TIMEOUT_SECONDS,
        )
        if done.returncode != 0:
            raise RuntimeError(f"AclCommand {' '.join(args)} failed: {done.stderr.strip()}")
