"""A TCP proxy that injects network faults between a process and a service.

It runs its own event loop in a background thread, so the same object serves a
synchronous script and an asyncio test alike::

    with TcpProxy("127.0.0.1", 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/db"
        ...
        proxy.blackhole()   # bytes stop flowing both ways; no FIN, no RST
        proxy.heal()        # they flow again, on the same connections

The faults, as a peer sees them:

- ``blackhole``: a crashed host, a failover or an expired NAT entry. Connections
  stay open and new ones are accepted, but nothing is forwarded in either
  direction until ``heal``; what was sent meanwhile is delivered then (TCP would
  have retransmitted it), unless the peer gave up first.
- ``cut``: every open connection is closed with a FIN on both sides; new ones work.
- ``reset``: every open connection is aborted with an RST on both sides.
- ``abandon``: every open connection is forgotten as a failover forgets it: the
  service's side is reset (the server frees the session and its locks), the
  client's side never hears anything again, no byte, no FIN, no RST. New
  connections work. After ``blackhole``, this is an outage the old connections
  do not survive.
- ``refuse``: the listening socket closes, so connecting is refused, until ``heal``
  listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from app.demo.lifecycle import Launched

T = TypeVar("T")
CHUNK = 64 * 1024
START_TIMEOUT_SECONDS = 5.0


@dataclass
class ProxyStats:
    """What went through the proxy since it started."""

    connections: int = 0
    bytes_up: int = 0  # client -> service
    bytes_down: int = 0  # service -> client


class _Link:
    """One proxied connection: the client's socket and the service's, pumped both ways."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        service: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.client = client
        self.service = service
        self.tasks: list[asyncio.Task[None]] = []

    def writers(self) -> tuple[asyncio.StreamWriter, asyncio.StreamWriter]:
        return self.client[1], self.service[1]

    def close(self, *, rst: bool) -> None:
        for task in self.tasks:
            task.cancel()
        for writer in self.writers():
            _close(writer, rst=rst)


def _close(writer: asyncio.StreamWriter, *, rst: bool) -> None:
    """Close one socket with a FIN, or with an RST."""
    sock = writer.get_extra_info("socket")
    if rst and sock is not None:
        # Linger on, timeout 0: close() sends an RST instead of a FIN.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if rst:
        writer.transport.abort()
    else:
        writer.close()


class TcpProxy(Launched):
    """Forwards ``listen_host:port`` to ``target_host:target_port`` until told otherwise."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self._port = listen_port
        self.stats = ProxyStats()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._links: set[_Link] = set()
        self._abandoned: list[asyncio.StreamWriter] = []  # clients' sockets left hanging

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port clients connect to (fixed once started, kept across ``refuse``/``heal``)."""
        return self._port

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self.listen_host}:{self._port}"

    def start(self) -> Self:
        """Listen and forward; returns once the port accepts connections."""
        self._thread.start()
        self._call(self._start(), timeout=START_TIMEOUT_SECONDS)
        return self

    def stop(self) -> None:
        """Close every connection and the listener, and end the thread."""
        if not self._thread.is_alive():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=START_TIMEOUT_SECONDS)
        self._loop.close()

    # -- faults ----------------------------------------------------------------------------

    def blackhole(self) -> None:
        """Stop forwarding in both directions, closing nothing (no FIN, no RST)."""
        self._call(self._set_flowing(False))

    def cut(self) -> None:
        """Close every open connection with a FIN on both sides."""
        self._call(self._close_links(rst=False))

    def reset(self) -> None:
        """Abort every open connection with an RST on both sides."""
        self._call(self._close_links(rst=True))

    def abandon(self) -> None:
        """Forget every open connection: an RST to the service, nothing ever to the client."""
        self._call(self._abandon())

    def refuse(self) -> None:
        """Stop listening: new connections are refused (open ones are left as they are)."""
        self._call(self._stop_listening())

    def heal(self) -> None:
        """Undo ``blackhole`` and ``refuse``: forward again and accept connections."""
        self._call(self._heal())

    @property
    def open_connections(self) -> int:
        """How many proxied connections are open now."""
        return len(self._links)

    def service_ports(self) -> set[int]:
        """The local ports of the proxy's open connections to the service: how the service
        sees these clients (e.g. ``pg_stat_activity.client_port``)."""
        return self._call(self._service_ports())

    # -- inside the proxy's loop -----------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        await self._listen()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.listen_host, self._port, reuse_address=True
        )
        self._port = self._server.sockets[0].getsockname()[1]

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _heal(self) -> None:
        assert self._flowing is not None
        self._flowing.set()
        if self._server is None:
            await self._listen()

    async def _set_flowing(self, flowing: bool) -> None:
        assert self._flowing is not None
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _close_links(self, *, rst: bool) -> None:
        links, self._links = self._links, set()
        for link in links:
            link.close(rst=rst)

    async def _abandon(self) -> None:
        links, self._links = self._links, set()
        for link in links:
            for task in link.tasks:
                task.cancel()
            _close(link.service[1], rst=True)
            self._abandoned.append(link.client[1])  # open, never read or written again

    async def _service_ports(self) -> set[int]:
        ports = set()
        for link in self._links:
            sockname = link.service[1].get_extra_info("sockname")
            if sockname:
                ports.add(int(sockname[1]))
        return ports

    async def _shutdown(self) -> None:
        await self._stop_listening()
        await self._close_links(rst=False)
        for writer in self._abandoned:
            writer.close()
        self._abandoned.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            service = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.stats.connections += 1
        link = _Link((reader, writer), service)
        self._links.add(link)
        up = asyncio.ensure_future(self._pump(reader, service[1], up=True))
        down = asyncio.ensure_future(self._pump(service[0], writer, up=False))
        link.tasks = [up, down]
        await asyncio.wait(link.tasks, return_when=asyncio.FIRST_COMPLETED)
        # One side closed: close the other (a FIN travels on, as it would through a router).
        if link in self._links:
            self._links.discard(link)
            link.close(rst=False)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, up: bool
    ) -> None:
        flowing = self._flowing
        assert flowing is not None
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                await flowing.wait()
                data = await reader.read(CHUNK)
                if not data:
                    return
                # Read while flowing, then blackholed: hold it until healed, as the network
                # would (the sender's TCP retransmits it).
                await flowing.wait()
                # Counted before the write: a peer that has the bytes sees them counted.
                if up:
                    self.stats.bytes_up += len(data)
                else:
                    self.stats.bytes_down += len(data)
                writer.write(data)
                await writer.drain()
