"""The fault proxy does what each fault says: forwards, holds bytes while blackholed
and delivers them once healed, closes with a FIN on ``cut``, an RST on ``reset``, and
refuses connections on ``refuse`` until healed (on the same port)."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from chaos.proxy import TcpProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except ConnectionResetError:
            pass  # the reset test's doing


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with TcpProxy("127.0.0.1", server.server_address[1]) as running:
        yield running
    server.shutdown()
    server.server_close()


def _connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=2)


def test_forwards_both_ways(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"ping")
        assert sock.recv(4) == b"ping"
    assert proxy.stats.bytes_up == 4 and proxy.stats.bytes_down == 4


def test_blackhole_holds_bytes_without_closing_and_heal_delivers_them(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"a")
        assert sock.recv(1) == b"a"
        proxy.blackhole()
        sock.sendall(b"held")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(4)  # no answer, and no FIN (recv would return b"") nor RST
        proxy.heal()
        sock.settimeout(2)
        assert sock.recv(4) == b"held"


def test_cut_closes_with_a_fin(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"x")
        assert sock.recv(1) == b"x"
        proxy.cut()
        assert sock.recv(1) == b""
    with _connect(proxy) as again:  # new connections still work
        again.sendall(b"y")
        assert again.recv(1) == b"y"


def test_reset_aborts_with_an_rst(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"x")
        assert sock.recv(1) == b"x"
        proxy.reset()
        with pytest.raises(ConnectionResetError):
            sock.recv(1)


def test_refuse_until_healed_on_the_same_port(proxy: TcpProxy) -> None:
    port = proxy.port
    proxy.refuse()
    with pytest.raises(ConnectionRefusedError):
        _connect(proxy)
    proxy.heal()
    assert proxy.port == port
    with _connect(proxy) as sock:
        sock.sendall(b"z")
        assert sock.recv(1) == b"z"
