"""The kernel's side of a database connection: dead-peer detection, and how long it waited.

``keep_alive`` turns on TCP keepalive and ``TCP_USER_TIMEOUT``: on a real network the
kernel then closes a connection whose peer stopped acknowledging (data unacknowledged
for ``USER_TIMEOUT_SECONDS``, or an idle connection whose keepalive probes go
unanswered), and the waiting statement fails at once. Neither helps while something on
the path still acknowledges the bytes (a proxy, a load balancer, a NAT box): that case is
``liveness``'s.

``last_traffic`` reads, from ``TCP_INFO`` (Linux), how long ago the socket last sent and
last received data: a connection that sent after it last received waits for an answer.
Elsewhere it returns None and nothing is probed.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

KEEPALIVE_IDLE_SECONDS = 5
KEEPALIVE_INTERVAL_SECONDS = 2
KEEPALIVE_PROBES = 5
# As long as the keepalive's own verdict takes, so that neither cuts the other short.
USER_TIMEOUT_SECONDS = KEEPALIVE_IDLE_SECONDS + KEEPALIVE_INTERVAL_SECONDS * KEEPALIVE_PROBES

# struct tcp_info (linux/tcp.h): 8 one-byte fields, then 32-bit ones; tcpi_last_data_sent
# is the 10th of those (offset 44), tcpi_last_data_recv the 12th (offset 52), in ms.
_TCP_INFO = getattr(socket, "TCP_INFO", None)
_LAST_DATA = struct.Struct("=44xI4xI")


def socket_of(driver_connection: Any) -> Any | None:
    """The socket under an asyncpg or aiomysql connection (None: not found, or closed)."""
    transport = transport_of(driver_connection)
    return None if transport is None else transport.get_extra_info("socket")


def transport_of(driver_connection: Any) -> Any | None:
    """The asyncio transport of an asyncpg or aiomysql connection; neither driver offers it
    publicly (asyncpg keeps ``_transport``, aiomysql its stream writer's)."""
    transport = getattr(driver_connection, "_transport", None)
    if transport is None:
        writer = getattr(driver_connection, "_writer", None)
        transport = getattr(writer, "transport", None)
    return transport


def keep_alive(sock: Any) -> None:
    """Keepalive and ``TCP_USER_TIMEOUT`` on ``sock``, as far as the platform has them."""
    options = [
        (socket.SOL_SOCKET, "SO_KEEPALIVE", 1),
        (socket.IPPROTO_TCP, "TCP_KEEPIDLE", KEEPALIVE_IDLE_SECONDS),
        (socket.IPPROTO_TCP, "TCP_KEEPINTVL", KEEPALIVE_INTERVAL_SECONDS),
        (socket.IPPROTO_TCP, "TCP_KEEPCNT", KEEPALIVE_PROBES),
        (socket.IPPROTO_TCP, "TCP_USER_TIMEOUT", USER_TIMEOUT_SECONDS * 1000),
    ]
    for level, name, value in options:
        option = getattr(socket, name, None)
        if option is not None:
            with contextlib.suppress(OSError):  # a Unix socket, or a platform without it
                sock.setsockopt(level, option, value)


def last_traffic(sock: Any) -> tuple[float, float] | None:
    """Seconds since ``sock`` last sent data and since it last received data (None: no
    ``TCP_INFO`` here, or not a TCP socket)."""
    if _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _LAST_DATA.size)
    except OSError:
        return None
    if len(info) < _LAST_DATA.size:
        return None
    sent_ms, received_ms = _LAST_DATA.unpack(info[: _LAST_DATA.size])
    return sent_ms / 1000, received_ms / 1000
