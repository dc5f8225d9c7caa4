"""The relay puts a keyed record on the partition every Kafka producer would.

Contract: ``RememberingPartitioner`` gives the partition of Kafka's default
partitioner (murmur2 of the key, as the Java client and Debezium compute it), for
every key and partition count, the first time a key is seen and every time after
(its remembered hash), also once more keys than it remembers have come by; the hash
is Kafka's own on Kafka's test vectors; a record without a key goes to one of the
available partitions.
"""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import DefaultPartitioner, murmur2

from app.outbox.partitioner import RememberingPartitioner

# Kafka's UtilsTest.testMurmur2: key -> the Java client's signed 32-bit hash.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "signed"), KAFKA_VECTORS.items())
def test_the_hash_is_kafkas(key: bytes, signed: int) -> None:
    partitions = list(range(12))
    expected = (signed & 0x7FFFFFFF) % 12
    assert RememberingPartitioner()(key, partitions, partitions) == expected
    assert murmur2(key) & 0xFFFFFFFF == signed & 0xFFFFFFFF


@pytest.mark.parametrize("count", [1, 3, 8, 12, 50])
def test_every_key_goes_where_the_default_partitioner_sends_it(count: int) -> None:
    rng = random.Random(count)
    keys = [str(rng.randrange(10**9)).encode() for _ in range(500)]
    keys += [f'"order-{n}"'.encode() for n in range(200)] + ["órder-ü".encode()]
    partitions = list(range(count))
    partitioner = RememberingPartitioner(keys=64)  # fewer than the keys: some are forgotten
    default = DefaultPartitioner()
    for _ in range(2):  # first sight, then again (remembered or hashed anew)
        for key in keys:
            assert partitioner(key, partitions, partitions) == default(key, partitions, partitions)


def test_a_record_without_a_key_goes_to_an_available_partition() -> None:
    partitioner = RememberingPartitioner()
    assert {partitioner(None, [0, 1, 2, 3], [1, 3]) for _ in range(50)} <= {1, 3}
