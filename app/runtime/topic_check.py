"""At start, before the worker joins its group: is every topic it needs there for it?

The worker needs its topic, each retry tier, the DLT and every topic its handlers name
in ``emits``. One metadata request for exactly those (never creating one, whatever
``auto.create.topics.enable`` says) tells, per topic, that it exists, that it does not,
or that the broker's ACLs deny this principal ``Describe`` on it (Kafka then hides
whether it exists). A topic it may not describe, one missing while
``TOPICS_DECLARE=false`` (nothing creates it), or one missing while the cluster has
fewer brokers up than ``TOPIC_REPLICATION_FACTOR`` (the broker would refuse to create
it), is a ``ConfigurationError`` naming each;
faust would otherwise ignore a missing topic, or retry a denied one, without a word.
The last check counts faust's leader topic too (``leader_topic``): faust creates it
with the same replication factor, and its refusal was faust's traceback. So does the
next: a missing topic the ACLs would not let this principal create (asked with
``validate_only``, nothing created), which faust's leader assignor met with a traceback
and exit code 1. And a consumer group the ACLs deny this principal (its coordinator
asked for): faust's consumer waited for it without a word, ``/ready`` saying only that
no partition was assigned.
"""

from __future__ import annotations

import ssl
from typing import Any

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from aiokafka.protocol.admin import CreateTopicsRequest
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest

from app.broker_security import BrokerSecurity
from app.errors import ConfigurationError
from app.kafka_clients import topic_errors, unknown_topics
from app.registry import Registry
from app.settings import Settings
from dlq.topics import dlt_topic, retry_topic


def needed_topics(settings: Settings, registry: Registry) -> list[str]:
    """The topics a worker reads or writes, in that order: main, retry tiers (the retired
    ones too), DLT, emitted."""
    base = settings.order_topic
    tiers = (retry_topic(base, d) for d in settings.read_retry_delay_seconds)
    own = [base, *tiers, dlt_topic(base)]
    return own + sorted(set(registry.emitted_topics) - set(own))


def leader_topic(settings: Settings) -> str:
    """faust's leader election topic (one partition), which faust creates itself when
    ``TOPICS_DECLARE`` is true."""
    return f"{settings.app_id}-__assignor-__leader"


async def check_topics(conn: Any, topics: list[str], settings: Settings) -> None:
    """Ask the broker over ``conn`` (an open aiokafka connection) about ``topics``; raise a
    ``ConfigurationError`` in one line naming those denied, with ``TOPICS_DECLARE=false``
    those missing, and with ``TOPICS_DECLARE=true`` those (faust's leader topic among
    them) the cluster has too few brokers up to create."""
    created = [*topics, leader_topic(settings)] if settings.topics_declare else topics
    answer = await conn.send(MetadataRequest(created, allow_auto_topic_creation=False))
    codes = topic_errors(answer)
    denied_code = TopicAuthorizationFailedError.errno
    denied = [t for t in topics if codes.get(t) == denied_code]
    unknown = unknown_topics(answer, created)
    missing = [t for t in created if t in unknown]
    problems = []
    if denied:
        problems.append(
            f"the broker denies {principal(settings.broker_security)} Describe on "
            + " and on ".join(f"topic {t!r}" for t in denied)
            + " (TopicAuthorizationFailed): an ACL must allow it (README: ACLs)"
        )
    if missing and not settings.topics_declare:
        problems.append(
            "TOPICS_DECLARE=false and the broker has no topic "
            + ", ".join(repr(t) for t in missing)
            + ": create them, or let the worker create them (TOPICS_DECLARE=true)"
        )
    brokers = len(answer.brokers)
    if missing and settings.topics_declare and settings.topic_replication_factor > brokers:
        problems.append(
            f"TOPIC_REPLICATION_FACTOR={settings.topic_replication_factor} and the cluster "
            f"has {brokers} broker(s) up: the worker cannot create topic "
            + ", ".join(repr(t) for t in missing)
            + " (each copy needs a broker of its own): lower TOPIC_REPLICATION_FACTOR, "
            "or start the brokers"
        )
    # The leader topic's existence is hidden from a principal that may not describe it.
    hidden = [t for t in created if t not in topics and codes.get(t) == denied_code]
    if settings.topics_declare and not problems:
        # faust asks to create its leader topic at every start, there or not, and the
        # broker checks Create before it looks: that one is asked about always.
        asked = sorted({*missing, *hidden, leader_topic(settings)})
        refused = await _create_refused(conn, asked, settings)
        if refused:
            problems.append(
                f"the broker denies {principal(settings.broker_security)} Create on "
                + ", ".join(repr(t) for t in refused)
                + ", which the worker creates (TOPICS_DECLARE=true): an ACL must allow Create "
                "on them (README: ACLs), or create them and set TOPICS_DECLARE=false"
            )
    if await _group_denied(conn, settings.app_id):
        problems.append(
            f"the broker denies {principal(settings.broker_security)} its consumer group "
            f"{settings.app_id!r} (APP_ID; GroupAuthorizationFailed): an ACL must allow Read "
            "on the group (README: ACLs)"
        )
    if problems:
        raise ConfigurationError("; ".join(problems))


async def _create_refused(conn: Any, topics: list[str], settings: Settings) -> list[str]:
    """Of ``topics`` (missing, or faust's leader topic), those the broker's ACLs would not
    let this principal create: a creation asked with ``validate_only`` (nothing is
    created; one that exists is answered as such, when Create is allowed)."""
    wanted: list[tuple[Any, ...]] = [
        (topic, settings.order_topic_partitions, settings.topic_replication_factor, [], [])
        for topic in topics
    ]
    answer = await conn.send(CreateTopicsRequest(wanted, 10_000, True))
    denied = {TopicAuthorizationFailedError.errno, ClusterAuthorizationFailedError.errno}
    return sorted(topic for topic, code, *_ in answer.topic_errors if code in denied)


async def _group_denied(conn: Any, group: str) -> bool:
    """Whether the broker's ACLs deny this principal the consumer group ``group``: its
    coordinator is asked for (Describe on the group, which Read implies); faust's consumer
    would otherwise wait for the group without a word."""
    answer = await conn.send(FindCoordinatorRequest(group, 0))
    codes = [getattr(answer, "error_code", None)]
    codes += [c.error_code for c in getattr(answer, "coordinators", ()) or ()]
    return GroupAuthorizationFailedError.errno in codes


def principal(security: BrokerSecurity) -> str:
    """Who the broker sees, as far as the settings tell."""
    if security.username:
        return f"User:{security.username}"
    if security.protocol == "PLAINTEXT":
        return "User:ANONYMOUS"
    if security.cert_file:
        subject = certificate_subject(security.cert_file)
        if subject is not None:  # Kafka's default principal for a client certificate
            return f"User:{subject}"
        return "the client certificate's principal"
    return "this client's principal"


# The subject's attributes as Java's X500Principal writes them (RFC 2253), which Kafka's
# default principal for a client certificate is (``ssl.principal.mapping.rules`` DEFAULT).
_RFC2253 = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def certificate_subject(path: str) -> str | None:
    """The subject of the PEM certificate at ``path`` as RFC 2253 writes it (``CN=orders,
    O=Shop``); None when it cannot be read or written plainly (an attribute Java writes as
    an OID, a value that needs escaping)."""
    try:
        decoded = ssl._ssl._test_decode_cert(path)  # type: ignore[attr-defined]
    except Exception:
        return None
    parts = []
    for rdn in reversed(decoded.get("subject", ())):
        for key, value in rdn:
            short = _RFC2253.get(key)
            if short is None or any(c in value for c in ',+"\\<>;=#') or value != value.strip():
                return None
            parts.append(f"{short}={value}")
    return ",".join(parts) or None
