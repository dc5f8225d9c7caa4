"""A group leader whose metadata lacks a subscribed topic asks the broker again, at once.

Contract (``app.runtime.assignor``, the worker's faust assignor): when the leader assigns
while its metadata knows no partitions of a topic some member subscribes to, it asks its
client for fresh metadata at once and every ``ASK_AGAIN_SECONDS`` while the topic is
still missing; once the metadata has it, it stops asking (aiokafka re-forms the group on
that change). With every topic known it asks nothing. faust's own assignor only warns,
and the group consumes nothing of that topic until the next periodic refresh (5 min).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from app.registry import Registry
from app.runtime import assignor
from app.runtime.faust_app import create_app
from app.settings import Settings


class Cluster:
    def __init__(self, known: dict[str, int]) -> None:
        self.known = known

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self.known.get(topic, 0)
        return set(range(count)) if count else None


class Client:
    def __init__(self) -> None:
        self.asked = 0

    def force_metadata_update(self) -> None:
        self.asked += 1


def members(*topics: str) -> dict[str, Any]:
    return {"m1": SimpleNamespace(subscription=list(topics))}


def worker_assignor(client: Client, monkeypatch: Any) -> Any:
    app = create_app(Settings(broker_url="kafka://b:9092", topics_declare=False), Registry())
    monkeypatch.setattr(assignor.PartitionAssignor, "_client", lambda self: client)
    monkeypatch.setattr(assignor.FaustAssignor, "assign", lambda self, c, m: {"assigned": True})
    return app.assignor


def test_missing_topics_are_those_a_member_subscribes_to_and_the_metadata_lacks() -> None:
    cluster = Cluster({"orders": 8})
    assert assignor.missing_topics(cluster, members("orders", "orders.DLT")) == ["orders.DLT"]
    assert assignor.missing_topics(cluster, members("orders")) == []


async def test_the_leader_asks_again_until_the_topic_is_known(monkeypatch: Any) -> None:
    monkeypatch.setattr(assignor, "ASK_AGAIN_SECONDS", 0.01)
    client = Client()
    cluster = Cluster({})
    leader = worker_assignor(client, monkeypatch)
    assert isinstance(leader, assignor.PartitionAssignor)

    assert leader.assign(cluster, members("orders")) == {"assigned": True}
    assert client.asked == 1
    await asyncio.sleep(0.05)
    assert client.asked >= 3  # still missing: asked again
    cluster.known["orders"] = 8
    await asyncio.sleep(0.03)
    asked = client.asked
    await asyncio.sleep(0.05)
    assert client.asked == asked  # known now: no more asking


async def test_with_every_topic_known_it_asks_nothing(monkeypatch: Any) -> None:
    client = Client()
    leader = worker_assignor(client, monkeypatch)
    leader.assign(Cluster({"orders": 8}), members("orders"))
    await asyncio.sleep(0.02)
    assert client.asked == 0
