"""The relay's partitioner: Kafka's default one, its key hashes remembered.

A keyed record goes to ``murmur2(key) & 0x7fffffff`` modulo the partition count,
as the Java client, Debezium and every Kafka producer that follows it send it:
an aggregate written by our relay and by any of them lands on one partition.
aiokafka computes murmur2 in Python, a fifth of the relay's time over a full
outbox; an aggregate's rows share their key, so each key is hashed once while
it stays among the most recent ``KEYS`` keys. Records without a key go to a
random partition, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from aiokafka.partitioner import DefaultPartitioner, murmur2

KEYS = 65_536


class RememberingPartitioner:
    """Kafka's default partitioner with an LRU cache of key hashes (one per producer)."""

    def __init__(self, keys: int = KEYS) -> None:
        self._hash = functools.lru_cache(maxsize=keys)(murmur2)

    def __call__(
        self, key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        if key is None:
            return int(DefaultPartitioner()(key, all_partitions, available))
        return all_partitions[(self._hash(key) & 0x7FFFFFFF) % len(all_partitions)]
