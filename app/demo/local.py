"""The local broker of either kind, chosen by name: Apache Kafka, or the embedded Tansu.

Apache Kafka is what production runs and what the tests, the benchmark and the
soak use by default; it needs Java 17 and Maven (for its jars, fetched once).
Tansu needs neither and stays the demo's broker.
"""

from __future__ import annotations

from pathlib import Path

from app.demo.broker import LocalBroker
from app.demo.kafka import ApacheKafka, KafkaCluster

BROKER_KINDS = ("kafka", "tansu")


def local_broker(
    kind: str,
    *,
    log_path: Path | None = None,
    advertised_port: int | None = None,
    port: int | None = None,
) -> LocalBroker | KafkaCluster:
    """A broker of ``kind`` (``kafka`` or ``tansu``), not yet started; on ``port`` when
    given, else on a free one."""
    if kind == "kafka":
        return ApacheKafka(log_path=log_path, advertised_port=advertised_port, port=port)
    if kind == "tansu":
        broker = LocalBroker(log_path=log_path, advertised_port=advertised_port)
        if port is not None:
            broker.port = port
        return broker
    raise ValueError(f"unknown broker kind {kind!r}: one of {', '.join(BROKER_KINDS)}")
