"""Every Kafka client of the framework, made by one factory from one settings object.

The worker's faust app, the relay's producer and its takeover search, the DLQ
command's reader and replayer, and the ``/ready`` broker check are all made by
``KafkaClients``: ``BROKER_URL`` and every ``BROKER_SECURITY_PROTOCOL``,
``BROKER_SASL_*`` and ``BROKER_SSL_*`` setting reach all of them or none. One TLS
context and one token provider serve every client of a process.

``check`` connects to the bootstrap servers as the clients do (TCP, TLS, SASL) and
says in one line why it could not: ``BrokerRefused`` when a setting must change (the
login refused, the broker's certificate not trusted or not naming the host, a client
certificate refused, a mechanism not offered), ``BrokerUnreachable`` otherwise.
``BrokerCheck``, ``/ready``'s, keeps its connection open between checks.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import create_conn
from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnknownTopicOrPartitionError,
    UnsupportedSaslMechanismError,
)
from aiokafka.protocol.metadata import MetadataRequest

from app.broker_security import BrokerSecurity
from app.broker_url import bootstrap_servers
from app.certificate_words import certificate_refused
from app.errors import BrokerRefused, BrokerUnreachable
from app.settings import Settings

CONNECT_TIMEOUT_SECONDS = 10.0
# Between the two questions to a listener that closed at the first request (``connect``).
SASL_CHECK_PAUSE_SECONDS = 0.5


class KafkaClients:
    """Makes the Kafka clients of one process, all with the same connection settings."""

    def __init__(self, broker_url: str, security: BrokerSecurity | None = None) -> None:
        self.broker_url = broker_url
        self.bootstrap = bootstrap_servers(broker_url)
        self.security = security or BrokerSecurity()
        self._options: dict[str, Any] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaClients:
        """The factory for ``BROKER_URL`` and the broker security settings."""
        return cls(settings.broker_url, settings.broker_security)

    @property
    def where(self) -> str:
        """The bootstrap servers, for messages."""
        return ", ".join(self.bootstrap)

    def options(self) -> Mapping[str, Any]:
        """The security options every client takes (``security_protocol``, ``ssl_context``,
        ``sasl_*``), made once."""
        if self._options is None:
            self._options = self.security.client_options()
        return self._options

    def producer(self, **options: Any) -> AIOKafkaProducer:
        """An aiokafka producer on the bootstrap servers (not started)."""
        return AIOKafkaProducer(bootstrap_servers=self.bootstrap, **self.options(), **options)

    def consumer(self, *topics: str, **options: Any) -> AIOKafkaConsumer:
        """An aiokafka consumer on the bootstrap servers (not started)."""
        return AIOKafkaConsumer(
            *topics, bootstrap_servers=self.bootstrap, **self.options(), **options
        )

    def admin(self, **options: Any) -> AIOKafkaAdminClient:
        """An aiokafka admin client on the bootstrap servers (not started)."""
        return AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self.options(), **options)

    def faust_options(self) -> dict[str, Any]:
        """faust's app settings for the same connection: ``broker`` and, unless PLAINTEXT,
        ``broker_credentials``."""
        import faust

        options = self.options()
        context = options.get("ssl_context")
        protocol = self.security.protocol
        app: dict[str, Any] = {"broker": self.broker_url}
        if protocol == "SSL":
            app["broker_credentials"] = faust.SSLCredentials(context)
        elif self.security.mechanism == "OAUTHBEARER":
            app["broker_credentials"] = faust.OAuthCredentials(
                oauth_cb=options["sasl_oauth_token_provider"], ssl_context=context
            )
        elif protocol != "PLAINTEXT":
            app["broker_credentials"] = faust.SASLCredentials(
                username=options["sasl_plain_username"],
                password=options["sasl_plain_password"],
                ssl_context=context,
                mechanism=options["sasl_mechanism"],
            )
        return app

    async def check(self, within: float = CONNECT_TIMEOUT_SECONDS) -> str:
        """Connect to each bootstrap server in turn until one takes this client's TLS and
        login; returns it. ``BrokerRefused`` if one refused the settings and none took
        them, ``BrokerUnreachable`` if none could be reached; each gives every server's
        reason in one line."""
        conn, server = await self.connect(within)
        conn.close()
        return server

    async def connect(self, within: float = CONNECT_TIMEOUT_SECONDS) -> tuple[Any, str]:
        """An open connection (aiokafka's ``AIOKafkaConnection``) to the first bootstrap
        server that takes it, and that server; raises as ``check``."""
        refused: list[str] = []
        unreachable: list[str] = []
        for server in self.bootstrap:
            host, _, port = server.rpartition(":")
            try:
                conn = await self._open(host, int(port), within)
            except TimeoutError:
                unreachable.append(
                    f"cannot reach the broker at {server}: no answer within {within:g} s"
                )
                continue
            except Exception as exc:
                is_refusal, why = self._diagnose(exc, host)
                if is_refusal:
                    refused.append(f"cannot connect to the broker at {server}: {why}")
                else:
                    unreachable.append(f"cannot reach the broker at {server}: {why}")
                continue
            if not self.security.protocol.startswith("SASL") and not await _serves(conn, within):
                # Asked again on a new connection, a moment later: a broker restarting, or a
                # connection cut, closes one too.
                await asyncio.sleep(SASL_CHECK_PAUSE_SECONDS)
                try:
                    conn = await self._open(host, int(port), within)
                except Exception:
                    unreachable.append(f"cannot reach the broker at {server}: it went away")
                    continue
                if await _serves(conn, within):
                    return conn, server
                refused.append(
                    f"cannot connect to the broker at {server}: it closed the connection at "
                    "the first request, twice, as a listener that asks for a SASL login does "
                    "(BROKER_SECURITY_PROTOCOL SASL_SSL or SASL_PLAINTEXT, and BROKER_SASL_*)"
                )
                continue
            return conn, server
        if refused:
            raise BrokerRefused("; ".join(refused + unreachable))
        raise BrokerUnreachable("; ".join(unreachable))

    async def _open(self, host: str, port: int, within: float) -> Any:
        """A connection made as the clients make theirs, within ``within`` seconds."""
        async with asyncio.timeout(within):
            return await create_conn(
                host, port, request_timeout_ms=int(within * 1000), **self.options()
            )

    def _diagnose(self, exc: BaseException, host: str) -> tuple[bool, str]:
        """Whether ``exc`` means a setting must change, and why, in words."""
        security = self.security
        cause = exc.__cause__ if isinstance(exc, KafkaConnectionError) else None
        if isinstance(exc, SaslAuthenticationFailed):
            who = f"login of {security.username}" if security.username else "token"
            message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else _text(exc)
            return True, (
                f"{who} refused ({security.mechanism}): {message}; check "
                + (
                    "BROKER_SASL_USERNAME and BROKER_SASL_PASSWORD"
                    if security.username
                    else "BROKER_SASL_OAUTH_TOKEN_PROVIDER"
                )
            )
        if isinstance(exc, IllegalSaslStateError):
            # The broker answers a SASL handshake on a listener without SASL so.
            return True, (
                f"this listener takes no SASL login ({security.protocol} asked for one): set "
                "BROKER_SECURITY_PROTOCOL to the listener's (PLAINTEXT or SSL), or connect to "
                "its SASL listener"
            )
        if isinstance(exc, UnsupportedSaslMechanismError):
            return True, (
                f"SASL {security.mechanism} not offered on this listener (BROKER_SASL_MECHANISM)"
            )
        if isinstance(exc, ssl.SSLCertVerificationError):
            reason = exc.verify_message or _text(exc)
            return True, certificate_refused(
                exc.verify_code,
                reason,
                misnamed=f"its certificate does not name {host} ({reason}); connect by a name "
                "the certificate holds",
                untrusted=f"its certificate is not trusted ({reason}); BROKER_SSL_CA_FILE must "
                "hold the CA that signed it",
            )
        if isinstance(cause, ssl.SSLError) or isinstance(exc, ssl.SSLError):
            alert = cause if isinstance(cause, ssl.SSLError) else exc
            reason = getattr(alert, "reason", None) or _text(alert)
            if security.cert_file is None:
                return True, (
                    f"TLS session ended by the broker ({reason}): it may require a client "
                    "certificate (BROKER_SSL_CERT_FILE, BROKER_SSL_KEY_FILE)"
                )
            return True, (
                f"client certificate refused ({reason}): BROKER_SSL_CERT_FILE must be "
                "signed by a CA the broker trusts"
            )
        if isinstance(exc, KafkaConnectionError | ConnectionResetError) and (
            cause is not None or isinstance(exc, ConnectionResetError)
        ):
            return False, (
                "connection closed before any answer: the broker or something between "
                f"(a proxy, a load balancer) cut it, or this listener does not speak "
                f"{security.protocol} (BROKER_SECURITY_PROTOCOL; a TLS or SASL listener "
                "closes a client that does not)"
            )
        return False, _text(exc)


async def _serves(conn: Any, within: float) -> bool:
    """Whether the listener behind ``conn`` (no SASL asked for) answers a request: Kafka's
    SASL listener answers the version handshake that opens a connection, then closes it at
    the first other request from a client that did not log in. A broker that does not
    answer in time counts as serving (the caller meets it again). ``conn`` is closed when
    it was closed under the request."""
    try:
        async with asyncio.timeout(within):
            await conn.send(MetadataRequest([]))
    except KafkaConnectionError:
        conn.close()
        return False
    except TimeoutError:
        pass
    return True


def topic_errors(answer: Any) -> dict[str, int]:
    """Each topic a metadata answer names, with its error code (0: none)."""
    return {topic: code for code, topic, *_ in answer.topics}


def unknown_topics(answer: Any, asked: Iterable[str]) -> set[str]:
    """Of the topics ``asked`` about, those the metadata answer calls unknown or leaves out."""
    errors = topic_errors(answer)
    unknown = UnknownTopicOrPartitionError.errno
    return {topic for topic in asked if errors.get(topic, unknown) == unknown}


def _text(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class BrokerCheck:
    """``/ready``'s broker check: a connection made as the clients make theirs (TLS and
    login included), kept open between checks. Each check asks the broker for the
    metadata of ``topics`` (the topics the worker consumes; never creating one) over it,
    and connects anew only when it is gone: one handshake and login (and one line of
    aiokafka's log) per connection, not per probe. ``missing_topics``: those of them the
    broker's last answer did not know (deleted under the worker, a broker that lost its
    data)."""

    def __init__(self, clients: KafkaClients, topics: Callable[[], Sequence[str]] = tuple) -> None:
        self._clients = clients
        self._topics = topics
        self._conn: Any = None
        self._server = ""
        self.missing_topics: list[str] = []
        self._one_at_a_time = asyncio.Lock()  # ``/ready`` and the watch share the connection

    async def check(self, within: float) -> str:
        """The server that answered within ``within`` seconds; raises why none did.

        A connection that went silent fails this check (the next one connects anew): a
        check never takes longer than ``within`` per bootstrap server (twice, when the
        connection kept was found closed), after the check in progress, if any."""
        async with self._one_at_a_time:
            return await self._check(within)

    async def _check(self, within: float) -> str:
        if self._conn is not None and self._conn.connected():
            try:
                return await self._ask(within)
            except BrokerUnreachable:
                raise
            except Exception:  # closed under it: connect anew
                self.close()
        self._conn, self._server = await self._clients.connect(within)
        return await self._ask(within)

    async def _ask(self, within: float) -> str:
        topics = list(self._topics())
        try:
            async with asyncio.timeout(within):
                answer = await self._conn.send(
                    MetadataRequest(topics, allow_auto_topic_creation=False)
                )
        except TimeoutError:
            self.close()
            raise BrokerUnreachable(
                f"cannot reach the broker at {self._server}: no answer within {within:g} s"
            ) from None
        self.missing_topics = sorted(unknown_topics(answer, topics))
        return self._server

    def close(self) -> None:
        """Close the connection, if open."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
