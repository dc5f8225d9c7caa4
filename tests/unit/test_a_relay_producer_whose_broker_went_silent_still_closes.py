"""The relay's producer closes within its request timeout, even when the broker went silent.

Contract (``KafkaBroker.stop``): closing delivers what the producer holds for at most
its request timeout, then drops the rest unacknowledged, so a relay (or a worker with
its relay) stopped while its broker does not answer still exits. An idempotent producer
never gives up a batch on its own: aiokafka's ``stop`` would wait for the broker for
ever. A broker of a few lines stands in here: it answers the producer's start (API
versions, metadata, a producer id) and never a produce request, as a leader behind a
blackhole would.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator

import pytest
from aiokafka.protocol.admin import ApiVersionResponse_v0
from aiokafka.protocol.metadata import MetadataResponse_v1
from aiokafka.protocol.transaction import InitProducerIdResponse_v0

from app.kafka_clients import KafkaClients
from app.outbox.broker import KafkaBroker
from app.outbox.message import Message

REQUEST_TIMEOUT = 1.0
TOPIC = "orders"
PRODUCE, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 3, 18, 22


class SilentLeader:
    """Answers everything a producer's start asks; never a produce request."""

    def __init__(self) -> None:
        self.port = 0
        self.produce_asked = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                [size] = struct.unpack(">i", await reader.readexactly(4))
                request = await reader.readexactly(size)
                api_key, _version, correlation = struct.unpack(">hhi", request[:8])
                body = self._answer(api_key)
                if body is None:
                    self.produce_asked.set()
                    continue
                payload = struct.pack(">i", correlation) + body
                writer.write(struct.pack(">i", len(payload)) + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def _answer(self, api_key: int) -> bytes | None:
        if api_key == API_VERSIONS:
            versions = [(PRODUCE, 3, 3), (METADATA, 1, 1), (API_VERSIONS, 0, 0)]
            return ApiVersionResponse_v0(0, [*versions, (INIT_PRODUCER_ID, 0, 0)]).encode()
        if api_key == METADATA:
            brokers = [(0, "127.0.0.1", self.port, None)]
            topics = [(0, TOPIC, False, [(0, 0, 0, [0], [0])])]
            return MetadataResponse_v1(brokers, 0, topics).encode()
        if api_key == INIT_PRODUCER_ID:
            return InitProducerIdResponse_v0(0, 0, 1000, 0).encode()
        return None


@pytest.fixture
async def silent_leader() -> AsyncIterator[SilentLeader]:
    leader = SilentLeader()
    server = await asyncio.start_server(leader.serve, "127.0.0.1", 0)
    leader.port = server.sockets[0].getsockname()[1]
    yield leader
    server.close()


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
async def test_a_producer_whose_broker_went_silent_closes_within_its_request_timeout(
    silent_leader: SilentLeader, idempotent: bool
) -> None:
    clients = KafkaClients(f"kafka://127.0.0.1:{silent_leader.port}")
    broker = KafkaBroker(clients, idempotent=idempotent, request_timeout_seconds=REQUEST_TIMEOUT)
    await broker.start()
    [outcome] = await broker.send_many([Message(TOPIC, b"order-1", b"{}", ())])
    assert isinstance(outcome, asyncio.Future)
    async with asyncio.timeout(REQUEST_TIMEOUT * 3):  # the record is on its way, unanswered
        await silent_leader.produce_asked.wait()

    started = time.monotonic()
    closing = asyncio.ensure_future(broker.stop())
    done, _ = await asyncio.wait([closing], timeout=REQUEST_TIMEOUT * 3 + 2)
    assert done, "the producer's close waits for a broker that does not answer"
    closing.result()
    assert time.monotonic() - started < REQUEST_TIMEOUT * 2 + 1
    # Never acknowledged: the relay keeps its row PROCESSING (or counts the failure).
    assert not outcome.done() or outcome.cancelled() or outcome.exception() is not None
