"""The fault proxy does what each fault says: forwards, holds bytes while blackholed
and delivers them once healed, closes with a FIN on ``cut``, an RST on ``reset``, and
refuses connections on ``refuse`` until healed (on the same port)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import pytest

from chaos.proxy import TcpProxy


class _Echo(socketserver.BaseRequestHandler):
    ended: ClassVar[list[str]] = []  # how each connection ended, as the service saw it

    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except ConnectionResetError:
            self.ended.append("rst")  # the reset and abandon tests' doing
        else:
            self.ended.append("fin")


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


def test_service_ports_are_how_the_service_sees_the_clients(proxy: TcpProxy) -> None:
    with _connect(proxy) as one, _connect(proxy) as two:
        for sock in (one, two):
            sock.sendall(b"p")
            assert sock.recv(1) == b"p"
        # The echo server's peers are the proxy's upstream sockets: two of them, distinct
        # from the clients' own ports.
        ports = proxy.service_ports()
        assert len(ports) == 2
        assert ports.isdisjoint({one.getsockname()[1], two.getsockname()[1]})
    proxy.cut()
    assert proxy.service_ports() == set()


def test_abandon_leaves_the_client_hanging_and_resets_the_service(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"a")
        assert sock.recv(1) == b"a"
        proxy.blackhole()
        sock.sendall(b"lost")
        _Echo.ended.clear()
        proxy.abandon()
        proxy.heal()
        assert proxy.open_connections == 0 and proxy.service_ports() == set()
        for _ in range(50):
            if _Echo.ended:
                break
            time.sleep(0.01)
        assert _Echo.ended == ["rst"]  # the service freed the session at once
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(4)  # nothing: no answer, no FIN (b""), no RST (ConnectionResetError)
        sock.sendall(b"more")  # the socket still takes bytes: nobody says it is dead
        with pytest.raises(TimeoutError):
            sock.recv(4)
    with _connect(proxy) as again:  # new connections work
        again.sendall(b"b")
        assert again.recv(1) == b"b"
