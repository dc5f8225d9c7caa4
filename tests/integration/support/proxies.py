"""``chaos.proxy`` in front of a test's database, and the database's URL through it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import make_url

from chaos.proxy import TcpProxy

_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}


@contextmanager
def database_proxy(database_url: str) -> Iterator[TcpProxy]:
    """A proxy forwarding to the server of ``database_url``, stopped afterwards."""
    url = make_url(database_url)
    port = url.port or _DEFAULT_PORTS[url.get_backend_name()]
    with TcpProxy(url.host or "127.0.0.1", port) as proxy:
        yield proxy


def through(database_url: str, proxy: TcpProxy) -> str:
    """``database_url`` with the proxy's address, its password kept."""
    url = make_url(database_url).set(host="127.0.0.1", port=proxy.port)
    return url.render_as_string(hide_password=False)
