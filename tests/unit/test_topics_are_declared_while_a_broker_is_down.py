"""A worker declares its topics while a broker of the cluster is down.

Contract: the worker's transport (``app.runtime.transport.Transport``, the one
``create_app`` gives faust) creates a missing topic even when the broker faust asks
first is down: a declaration that fails on the broker's account (a retriable Kafka
error such as ``NodeNotReadyError``, or a request that reached a broker that is not
the controller) is tried again with fresh metadata until ``TOPIC_DECLARE_SECONDS``
have passed; any other failure, or one past that time, is raised at once. In the
cluster soak a worker restarted while a broker was down exited with code 1 instead.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import faust
import pytest
from aiokafka.errors import NodeNotReadyError, TopicAuthorizationFailedError
from aiokafka.protocol.admin import CreateTopicsRequest

from app.runtime import transport as module
from app.runtime.faust_app import App
from app.runtime.transport import Transport

TOPIC = "orders.DLT"
DEAD, ALIVE = 2, 1


class Owner:
    """The faust service that asks for the topic (its ``wait`` runs the request)."""

    should_stop = False
    log = SimpleNamespace(info=lambda *a, **k: None, debug=lambda *a, **k: None)

    async def wait(self, coro: Any, **_: Any) -> Any:
        return SimpleNamespace(stopped=False, result=await coro)


class Cluster:
    """Brokers ``DEAD`` and ``ALIVE``; metadata names ``DEAD`` first until it is refreshed
    ``refreshes_to_forget`` times; ``ALIVE`` answers as the controller."""

    def __init__(self, refreshes_to_forget: int = 1, create_error: int = 0) -> None:
        self.known = [DEAD, ALIVE]
        self.refreshes_to_forget = refreshes_to_forget
        self.create_error = create_error
        self.created: list[int] = []
        self.cluster = SimpleNamespace(
            topics=lambda: set(),
            brokers=lambda: [SimpleNamespace(nodeId=n) for n in self.known],
        )

    async def send(self, node_id: int, request: Any) -> Any:
        if node_id == DEAD:
            raise NodeNotReadyError(f"Attempt to send a request to node {node_id}")
        if isinstance(request, CreateTopicsRequest):
            self.created.append(node_id)
            return SimpleNamespace(topic_errors=[(TOPIC, self.create_error, "")])
        return SimpleNamespace(controller_id=ALIVE)

    async def force_metadata_update(self) -> bool:
        self.refreshes_to_forget -= 1
        if self.refreshes_to_forget <= 0:
            self.known = [ALIVE]
        return True


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "TOPIC_RETRY_SECONDS", 0.0)


def _transport() -> Transport:
    return Transport("kafka://127.0.0.1:9", faust.App("declare-test"))


async def test_the_topic_is_created_once_the_dead_broker_left_the_metadata() -> None:
    client = Cluster(refreshes_to_forget=3)
    await _transport()._create_topic(Owner(), client, TOPIC, 8, 3)
    assert client.created == [ALIVE]
    assert client.known == [ALIVE]


async def test_a_failure_that_is_not_the_brokers_is_raised_at_once() -> None:
    client = Cluster(create_error=TopicAuthorizationFailedError.errno)
    client.known = [ALIVE]
    with pytest.raises(TopicAuthorizationFailedError):
        await _transport()._create_topic(Owner(), client, TOPIC, 8, 3)
    assert client.created == [ALIVE]


async def test_past_the_deadline_the_brokers_failure_is_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "TOPIC_DECLARE_SECONDS", 0.0)
    client = Cluster(refreshes_to_forget=100)
    with pytest.raises(NodeNotReadyError):
        await _transport()._create_topic(Owner(), client, TOPIC, 8, 3)
    assert client.created == []


def test_the_worker_app_uses_this_transport() -> None:
    app = App("transport-test", broker="kafka://127.0.0.1:9;kafka://127.0.0.1:10")
    assert isinstance(app.transport, Transport)
    assert isinstance(app.producer_transport, Transport)
