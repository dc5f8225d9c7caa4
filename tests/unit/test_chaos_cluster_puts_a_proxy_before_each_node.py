"""The cluster soak puts each Kafka node behind its own proxy, and needs Apache Kafka.

Contract: for a profile of three brokers, ``ChaosBrokers.create`` makes a
``KafkaCluster`` of three nodes, each advertising the port of its own proxy and each
proxy forwarding to its node, with ``default.replication.factor=3`` and
``min.insync.replicas=2``; every client's bootstrap list and ``BROKER_URL`` name all
three proxies. The single-broker profiles keep one node and one proxy.
``python -m chaos --profile cluster --broker tansu`` refuses in one line, exit 2.
Nothing is started.
"""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from app.demo.kafka import KafkaCluster
from chaos.brokers import ChaosBrokers
from chaos.cli import main
from chaos.profile import CLUSTER, SHORT


def test_each_node_advertises_its_own_proxy(tmp_path: Path) -> None:
    brokers = ChaosBrokers.create("kafka", CLUSTER, tmp_path)
    cluster = brokers.cluster
    assert isinstance(cluster, KafkaCluster) and len(cluster.nodes) == 3
    for node, proxy in zip(cluster.nodes, brokers.proxies, strict=True):
        assert node.advertised_port == proxy.port
        assert proxy.target == ("127.0.0.1", node.port)
        assert brokers.proxy_of(node) is proxy
    assert cluster.properties == {"default.replication.factor": "3", "min.insync.replicas": "2"}
    addresses = [f"127.0.0.1:{proxy.port}" for proxy in brokers.proxies]
    assert brokers.bootstrap == ",".join(addresses)
    assert brokers.url == ";".join(f"kafka://{a}" for a in addresses)
    assert brokers.url == cluster.url


def test_a_single_broker_profile_keeps_one_proxy(tmp_path: Path) -> None:
    brokers = ChaosBrokers.create("kafka", SHORT, tmp_path)
    (proxy,) = brokers.proxies
    assert brokers.bootstrap == f"127.0.0.1:{proxy.port}"
    assert brokers.url == f"kafka://127.0.0.1:{proxy.port}"


def test_the_cluster_profile_refuses_tansu_in_one_line() -> None:
    command = typer.Typer()
    command.command()(main)
    result = CliRunner().invoke(command, ["--profile", "cluster", "--broker", "tansu"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "--broker kafka" in result.output
