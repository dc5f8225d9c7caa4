"""A topic the broker's list left out is missing only when, asked by name, it is unknown.

Contract (``KafkaBroker.missing_topics``): a broker enforcing ACLs leaves out of its
topic list every topic the principal may not Describe, so the relay asks about those by
name. Only a topic the broker then names unknown (``UnknownTopicOrPartition``) is
missing, and its rows count attempts. One it refuses to describe (an ACL denies it) and
one it describes by then (Write granted between the list and the question) are there:
their sends meet the broker's answer and wait in place, or go. Before, a topic
described by the time it was asked about by name counted as missing, and its rows
counted an attempt just as its Write was granted.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from app.outbox.broker import KafkaBroker

NO_ERROR, UNKNOWN_TOPIC, TOPIC_AUTHORIZATION_FAILED = 0, 3, 29


class Client:
    """Lists ``listed``; asked by name, answers each topic's error code from ``by_name``."""

    def __init__(self, listed: set[str], by_name: dict[str, int]) -> None:
        self.listed = listed
        self.by_name = by_name
        self.asked: list[list[str]] = []

    async def fetch_all_metadata(self) -> Any:
        return SimpleNamespace(topics=lambda: set(self.listed))

    def get_random_node(self) -> int:
        return 1

    async def send(self, node: int, request: Any) -> Any:
        topics = request._topics  # what aiokafka builds the request from
        self.asked.append(list(topics))
        answered = [(self.by_name[t], t, False, []) for t in topics if t in self.by_name]
        return SimpleNamespace(topics=answered)


def broker_on(client: Client) -> KafkaBroker:
    clients = SimpleNamespace(producer=lambda **options: SimpleNamespace(client=client))
    return KafkaBroker(clients)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "missing"),
    [
        (NO_ERROR, set()),  # described by now: Write granted between the two questions
        (TOPIC_AUTHORIZATION_FAILED, set()),  # not described: the send meets the denial
        (UNKNOWN_TOPIC, {"emitted"}),
    ],
    ids=["described-by-now", "denied", "unknown"],
)
async def test_a_topic_left_out_of_the_list_is_missing_only_when_unknown_by_name(
    answer: int, missing: set[str]
) -> None:
    client = Client(listed={"orders"}, by_name={"emitted": answer})
    broker = broker_on(client)
    assert await broker.missing_topics({"orders", "emitted"}) == missing
    assert client.asked == [["emitted"]]


async def test_a_topic_the_broker_leaves_out_of_its_answer_too_is_missing() -> None:
    client = Client(listed=set(), by_name={})
    assert await broker_on(client).missing_topics({"emitted"}) == {"emitted"}


async def test_listed_topics_are_not_asked_about_by_name() -> None:
    client = Client(listed={"orders", "emitted"}, by_name={})
    assert await broker_on(client).missing_topics({"orders", "emitted"}) == set()
    assert client.asked == []
