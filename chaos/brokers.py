"""The soak's brokers: one node or a cluster, each node behind its own ``TcpProxy``.

Each node advertises its proxy's port, so every client connection and, in a
cluster, every replica's fetch from its leader goes through a proxy: cutting or
blackholing a proxy cuts a node off from clients and from its peers alike (the
controllers' quorum talks on its own listener, so the cluster still sees the node
alive). Taking every proxy down (``take_down``) is, to every client, the broker
stopped: connections reset, new ones refused. ``busiest_leader`` finds the node
whose loss hurts most: the leader of the partition holding the most records.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from app.demo.broker import LocalBroker, free_port
from app.demo.kafka import KafkaCluster, KafkaNode
from app.demo.local import local_broker
from chaos.profile import Profile
from chaos.proxy import TcpProxy

LOOKUP_TIMEOUT_SECONDS = 20.0
REQUEST_TIMEOUT_MS = 5_000


@dataclass
class ChaosBrokers:
    """The broker (a cluster's nodes) and one proxy per node, in node order."""

    broker: LocalBroker | KafkaCluster
    proxies: list[TcpProxy]

    @classmethod
    def create(cls, kind: str, profile: Profile, workdir: Path) -> ChaosBrokers:
        """Brokers for ``profile`` (not started): ``profile.brokers`` nodes, each advertising
        a proxy's port; a cluster replicates as the profile says."""
        ports = [free_port() for _ in range(profile.brokers)]
        broker: LocalBroker | KafkaCluster
        if profile.brokers == 1:
            broker = local_broker(kind, log_path=workdir / "broker.log", advertised_port=ports[0])
        else:
            broker = KafkaCluster(
                size=profile.brokers,
                log_dir=workdir,
                advertised_ports=ports,
                properties={
                    "default.replication.factor": str(profile.replication_factor),
                    "min.insync.replicas": str(profile.min_insync_replicas),
                },
            )
        targets = (
            [n.port for n in broker.nodes] if isinstance(broker, KafkaCluster) else [broker.port]
        )
        proxies = [
            TcpProxy("127.0.0.1", target, listen_port=port)
            for target, port in zip(targets, ports, strict=True)
        ]
        return cls(broker, proxies)

    @property
    def bootstrap(self) -> str:
        """Every proxy's ``host:port``, comma-separated: the bootstrap list of every client."""
        return ",".join(proxy.address for proxy in self.proxies)

    @property
    def url(self) -> str:
        """``BROKER_URL``: every proxy as ``kafka://host:port``, separated by ``;``."""
        return ";".join(f"kafka://{proxy.address}" for proxy in self.proxies)

    @property
    def cluster(self) -> KafkaCluster:
        """The Kafka cluster (a ``RuntimeError`` for Tansu, which has no nodes to kill)."""
        if not isinstance(self.broker, KafkaCluster):
            raise RuntimeError("the broker is not an Apache Kafka cluster")
        return self.broker

    def start_proxies(self) -> None:
        """Listen on every proxy's port (fixed before the nodes started: they advertise it)."""
        for proxy in self.proxies:
            proxy.start()

    def stop_proxies(self) -> None:
        """Close every proxied connection and listener."""
        for proxy in self.proxies:
            proxy.stop()

    @property
    def open_connections(self) -> int:
        """Proxied connections open now, to every node."""
        return sum(proxy.open_connections for proxy in self.proxies)

    def cut(self) -> None:
        """Close every connection to every node with a FIN."""
        for proxy in self.proxies:
            proxy.cut()

    def take_down(self) -> None:
        """Every node gone, as a stopped broker is: each connection reset, new ones refused
        (until ``bring_back``)."""
        for proxy in self.proxies:
            proxy.refuse()
            proxy.reset()

    def bring_back(self) -> None:
        """Accept connections to every node again (the nodes kept their data meanwhile)."""
        for proxy in self.proxies:
            proxy.heal()

    def proxy_of(self, node: KafkaNode) -> TcpProxy:
        """The proxy in front of ``node``."""
        return self.proxies[self.cluster.nodes.index(node)]

    async def busiest_leader(self, topic: str) -> tuple[KafkaNode, int, int]:
        """The node leading the partition of ``topic`` with the most records: the node,
        the partition and its record count (the end offset; nothing is deleted)."""
        async with asyncio.timeout(LOOKUP_TIMEOUT_SECONDS):
            leaders = await _leaders(self.bootstrap, topic)
            ends = await end_offsets(self.bootstrap, topic, sorted(leaders))
        partition = max(ends, key=lambda p: (ends[p], -p))
        leader = leaders[partition]
        node = next((n for n in self.cluster.nodes if n.node_id == leader), None)
        if node is None:
            raise RuntimeError(f"partition {partition} of {topic} has no leader ({leader})")
        return node, partition, ends[partition]


async def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> the id of the node leading it (-1: none right now)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    partitions = next(t["partitions"] for t in described if t["topic"] == topic)
    return {int(p["partition"]): int(p["leader"]) for p in partitions}


async def end_offsets(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """partition -> its end offset (a consumer without a group: it joins nothing)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        wanted = [TopicPartition(topic, p) for p in partitions]
        ends = await consumer.end_offsets(wanted)
    finally:
        await consumer.stop()
    return {tp.partition: int(offset) for tp, offset in ends.items()}
