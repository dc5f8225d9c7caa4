"""``BROKER_URL``: the brokers it names, as the Kafka clients take them.

faust writes its brokers as ``kafka://h1:9092;kafka://h2:9092`` (``,`` works too); the
clients take ``["h1:9092", "h2:9092"]``. A mistake in it is a settings error at start
(``check_broker_url``). It names no user or password: the broker's login has settings of
its own (``BROKER_SASL_USERNAME``, ``BROKER_SASL_PASSWORD``), and an address is shown in
log lines and errors.
"""

from __future__ import annotations

from app.errors import ConfigurationError

DEFAULT_PORT = 9092
SCHEMES = ("kafka", "aiokafka")  # faust's words for its Kafka driver
NO_LOGIN = (
    "a broker address in it holds a user name or password (the value is not shown): give "
    "them as BROKER_SASL_USERNAME and BROKER_SASL_PASSWORD, with BROKER_SECURITY_PROTOCOL "
    "SASL_PLAINTEXT or SASL_SSL"
)


def check_broker_url(broker_url: str) -> None:
    """``ValueError`` unless ``bootstrap_servers`` reads ``broker_url``; one that holds a
    login is refused without being quoted."""
    for part in _parts(broker_url):
        if "@" in part.split("://", 1)[-1].split("/", 1)[0]:
            raise ValueError(NO_LOGIN)
    try:
        bootstrap_servers(broker_url)
    except ConfigurationError as exc:
        raise ValueError(str(exc).removeprefix("BROKER_URL: ")) from None


def bootstrap_servers(broker_url: str) -> list[str]:
    """faust's ``kafka://h1:9092;kafka://h2:9092`` (or ``,``) → ``["h1:9092", "h2:9092"]``;
    a server without a port gets Kafka's, 9092, as faust and aiokafka give it."""
    servers = [_server(part) for part in _parts(broker_url)]
    if not servers:
        raise ConfigurationError(f"BROKER_URL names no broker: {broker_url!r}")
    return servers


def _server(part: str) -> str:
    """``host:port`` of one server as ``BROKER_URL`` writes it (``kafka://`` optional)."""
    scheme, sep, rest = part.partition("://")
    if sep and scheme.lower() not in SCHEMES:
        raise ConfigurationError(
            f"BROKER_URL: {scheme + '://'!r} is no Kafka scheme (write kafka://host:9092)"
        )
    return _with_port((rest if sep else part).rstrip("/"))


def _with_port(server: str) -> str:
    if not server or server.startswith(":"):
        named = f"{server!r} names" if server else "a server in it names"
        raise ConfigurationError(f"BROKER_URL: {named} no host (write kafka://host:9092)")
    if "/" in server or any(c.isspace() for c in server):
        # ``kafka//h:9092`` (a colon left out) would be looked up as a host, and waited for.
        raise ConfigurationError(
            f"BROKER_URL: {server!r} is no host and port (write kafka://host:9092)"
        )
    host, colon, port = server.rpartition(":")
    if not colon or host.endswith(":") or port.endswith("]"):  # no port; an IPv6 address
        return f"{server}:{DEFAULT_PORT}"
    if not port.isdigit() or not 0 < int(port) < 65_536:
        raise ConfigurationError(
            f"BROKER_URL: the port of {server!r} is not a number from 1 to 65535"
        )
    return server


def _parts(broker_url: str) -> list[str]:
    return [part.strip() for part in broker_url.replace(",", ";").split(";") if part.strip()]
