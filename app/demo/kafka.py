"""A throw-away Apache Kafka (KRaft) on 127.0.0.1, for development, tests, bench and soak.

``ApacheKafka`` is one combined broker and controller; ``KafkaCluster`` is several,
each its own JVM, voters of one quorum. Both have the interface of the Tansu
``LocalBroker`` (``bootstrap``, ``url``, ``start``, ``stop``, a context manager),
so whoever starts a broker can take either. The jars come from Maven Central
(``app.demo.kafka_jars``); each node's data lives in a temporary folder that goes
with it. Production runs its own Kafka: nothing in the framework imports this.

Besides PLAINTEXT (which the nodes speak among themselves), a cluster may offer
client ``listeners`` of other security protocols, each on a port of its own, and
SCRAM users created when the data folder is formatted (``app.demo.secure_kafka``
builds the TLS and SASL ones the tests use).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from app.demo.broker import free_port
from app.demo.kafka_jars import java_binary, kafka_classpath
from app.demo.lifecycle import Launched

_LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.state.name = state.change.logger
logger.state.level = WARN
"""
# Kafka's own system tests wait for this line.
_STARTED = b"Kafka Server started"


def cluster_id() -> str:
    """16 random bytes, base64url without padding, never starting with ``-`` (read as a flag)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class Listener:
    """A client listener besides PLAINTEXT.

    ``name`` is the listener's (and, lower-cased, its ``listener.name.<name>.``
    prefix's); ``protocol`` its security protocol; ``properties`` its own settings,
    written under that prefix (``ssl.client.auth`` ...); never printed, as they may hold
    passwords (a JAAS configuration's users).
    """

    name: str
    protocol: str
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass
class KafkaNode:
    """One Kafka JVM: a voter of the quorum and a broker, with its own ports and data."""

    node_id: int
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    # Clients are told to connect here (a proxy in front of the broker); default: ``port``.
    advertised_port: int | None = None
    log_path: Path | None = None
    heap_mb: int = 512
    listeners: tuple[Listener, ...] = ()
    # ``kafka-storage format --add-scram`` values: ``SCRAM-SHA-512=[name=alice,password=...]``
    # (never printed).
    scram_users: tuple[str, ...] = field(default=(), repr=False)
    # Each listener's port, by name (free ports unless given).
    listener_ports: dict[str, int] = field(default_factory=dict)
    _workdir: Path | None = None
    _process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` of this node for Kafka clients."""
        return f"127.0.0.1:{self.port}"

    def __post_init__(self) -> None:
        for listener in self.listeners:
            self.listener_ports.setdefault(listener.name, free_port())

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def data_dir(self) -> Path | None:
        """The node's configuration, data and (by default) log, while it exists."""
        return self._workdir

    @property
    def running(self) -> bool:
        """Whether the JVM is alive."""
        return self._process is not None and self._process.poll() is None

    def properties(self, voters: str, extra: Mapping[str, str]) -> dict[str, str]:
        """The node's ``server.properties``."""
        assert self._workdir is not None
        advertised = self.advertised_port or self.port
        ports = self.listener_ports
        listeners = "".join(f",{x.name}://127.0.0.1:{ports[x.name]}" for x in self.listeners)
        protocols = "".join(f",{x.name}:{x.protocol}" for x in self.listeners)
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
                + listeners
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{advertised}" + listeners,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": (
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT" + protocols
            ),
            "log.dirs": str(self._workdir / "kraft"),
            "offsets.topic.num.partitions": "8",
            "group.initial.rebalance.delay.ms": "0",
            "log.cleaner.dedupe.buffer.size": "33554432",
            "auto.create.topics.enable": "false",
        }
        for listener in self.listeners:
            prefix = f"listener.name.{listener.name.lower()}."
            props.update({prefix + key: value for key, value in listener.properties.items()})
        props.update(extra)
        return props

    def prepare(self, cluster: str, voters: str, extra: Mapping[str, str]) -> None:
        """Write the configuration and format the data folder (once per node)."""
        self._workdir = Path(tempfile.mkdtemp(prefix=f"kafka-{self.node_id}-"))
        config = self._workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties(voters, extra).items()))
        (self._workdir / "log4j2.properties").write_text(_LOG4J2)
        scram = [arg for user in self.scram_users for arg in ("--add-scram", user)]
        formatted = subprocess.run(
            [
                *self._java(),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster,
                "-c",
                str(config),
                *scram,
            ],
            capture_output=True,
            text=True,
        )
        if formatted.returncode != 0:
            raise RuntimeError(f"formatting Kafka node {self.node_id} failed: {formatted.stderr}")

    def _java(self) -> list[str]:
        assert self._workdir is not None
        return [
            java_binary(),
            f"-Xmx{self.heap_mb}m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts in 2 s instead of 4 on two cores
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self._workdir / 'log4j2.properties'}",
            "-cp",
            kafka_classpath(),
        ]

    def launch(self) -> None:
        """Start the JVM (the data folder keeps what an earlier run of this node wrote)."""
        assert self._workdir is not None
        log = self.log_path or self._workdir / "broker.log"
        with open(log, "ab") as out:
            self._process = subprocess.Popen(
                [*self._java(), "kafka.Kafka", str(self._workdir / "server.properties")],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C meant for the caller reaches it through stop()
            )
        self._log = log
        self._log_start = log.stat().st_size if log.exists() else 0

    def wait_started(self, deadline: float) -> None:
        """Until the log says ``Kafka Server started`` and the port accepts connections."""
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"Kafka node {self.node_id} exited with code {self._process.returncode}"
                    f" (log: {self._log})"
                )
            with open(self._log, "rb") as log:
                log.seek(self._log_start)
                if _STARTED in log.read():
                    try:
                        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                            return
                    except OSError:
                        pass
            time.sleep(0.1)
        raise RuntimeError(f"Kafka node {self.node_id} did not start (log: {self._log})")

    def kill(self) -> None:
        """SIGKILL: no controlled shutdown, as a crashed machine."""
        if self.running:
            assert self._process is not None
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()

    def terminate(self, timeout: float = 15.0) -> None:
        """SIGTERM (controlled shutdown), SIGKILL after ``timeout``."""
        if self.running:
            assert self._process is not None
            self._process.terminate()
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def remove(self) -> None:
        """Stop the node and delete its data."""
        self.kill()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


@dataclass
class KafkaCluster(Launched):
    """``size`` Kafka nodes on 127.0.0.1, each broker and controller; use as a context manager.

    ``advertised_ports`` puts a proxy's port in front of each node (see ``KafkaNode``);
    ``properties`` are added to every node's configuration.
    """

    size: int = 1
    log_dir: Path | None = None
    advertised_ports: list[int] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    heap_mb: int = 512
    listeners: tuple[Listener, ...] = ()
    scram_users: tuple[str, ...] = field(default=(), repr=False)
    nodes: list[KafkaNode] = field(default_factory=list)

    kind = "kafka"
    # Apache Kafka takes idempotent producers (InitProducerId).
    idempotent = True

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes = [
                KafkaNode(
                    node_id=i + 1,
                    advertised_port=self.advertised_ports[i] if self.advertised_ports else None,
                    log_path=self.log_dir / f"kafka-{i + 1}.log" if self.log_dir else None,
                    heap_mb=self.heap_mb,
                    listeners=self.listeners,
                    scram_users=self.scram_users,
                )
                for i in range(self.size)
            ]

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` for Kafka clients (the advertised addresses)."""
        return ",".join(f"127.0.0.1:{n.advertised_port or n.port}" for n in self.nodes)

    @property
    def url(self) -> str:
        """The ``BROKER_URL`` a worker takes."""
        return ";".join(f"kafka://127.0.0.1:{n.advertised_port or n.port}" for n in self.nodes)

    def url_of(self, listener: str, host: str = "127.0.0.1") -> str:
        """The ``BROKER_URL`` of the client listener named ``listener``."""
        return ";".join(f"kafka://{host}:{n.listener_ports[listener]}" for n in self.nodes)

    @property
    def port(self) -> int:
        """The first node's own port."""
        return self.nodes[0].port

    @property
    def pid(self) -> int | None:
        """The first node's process id."""
        return self.nodes[0].pid

    def start(self, timeout: float = 90.0) -> Self:
        """Format every node, start them all and wait until each is ready."""
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        replicas = str(min(3, self.size))
        extra = {
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": str(min(2, self.size)),
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": str(min(2, self.size)),
            **self.properties,
        }
        cluster = cluster_id()
        deadline = time.monotonic() + timeout
        try:
            for node in self.nodes:
                node.prepare(cluster, voters, extra)
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.wait_started(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, node: KafkaNode, timeout: float = 60.0) -> None:
        """Start a stopped or killed node again on its data."""
        node.launch()
        node.wait_started(time.monotonic() + timeout)

    def stop(self) -> None:
        """Stop every node; the topics are gone with them."""
        for node in self.nodes:
            node.remove()


def ApacheKafka(
    log_path: Path | None = None,
    advertised_port: int | None = None,
    properties: dict[str, str] | None = None,
    port: int | None = None,
) -> KafkaCluster:
    """One combined Kafka node, as the tests and ``python -m app broker`` use it."""
    node = KafkaNode(node_id=1, advertised_port=advertised_port, log_path=log_path)
    if port is not None:
        node.port = port
    return KafkaCluster(size=1, properties=properties or {}, nodes=[node])
