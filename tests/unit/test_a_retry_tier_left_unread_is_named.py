"""A retry tier the worker no longer reads is named with the setting that reads it.

Contract: a tier's delay reads back from its name (``30s``, ``5m``, ``1h``, ``0.5s``);
a record counts as the deployment's when its ``dlt-app-id`` names it or it names
none; the ``retry tiers`` check passes while nothing was found, and otherwise names
each tier with its records and ``RETRY_DELAYS_RETIRED`` with the tiers' delays in
seconds; the worker reads the retired tiers beside ``RETRY_DELAYS``'. The tiers the
group's members read are those their metadata subscribes to, told only by a stable group:
a group rebalancing (its members' metadata left out by the broker) or an error answer
makes the look tell nothing (``GroupUnsettled``), rather than every tier unread.
"""

from __future__ import annotations

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from app.kafka_clients import KafkaClients
from app.runtime.tier_check import (
    GroupUnsettled,
    StrandedTiers,
    of_deployment,
    read_tiers,
    subscribed,
)
from app.settings import Settings
from dlq.headers import DLT_APP_ID
from dlq.topics import delay_label, delay_seconds


@pytest.mark.parametrize("delay", [0.5, 1, 30, 90, 300, 3600, 7200, 86_400])
def test_a_tiers_delay_reads_back_from_its_name(delay: float) -> None:
    assert delay_seconds(delay_label(delay)) == delay


@pytest.mark.parametrize("label", ["", "s", "5x", "-5s", "0s", "abc"])
def test_a_name_that_is_no_delay_reads_as_none(label: str) -> None:
    assert delay_seconds(label) is None


def test_a_record_is_the_deployments_when_it_names_it_or_none() -> None:
    assert of_deployment([("traceparent", b"x"), (DLT_APP_ID, b"orders")], "orders")
    assert of_deployment([("traceparent", b"x")], "orders")
    assert not of_deployment([(DLT_APP_ID, b"billing")], "orders")


def test_the_check_names_each_tier_and_the_setting_that_reads_it() -> None:
    settings = Settings(order_topic="orders", retry_delays="1,60")
    tiers = StrandedTiers(KafkaClients.from_settings(settings), settings)
    assert tiers.check().ok

    tiers.found = {"orders.retry.30s": 2, "orders.retry.5m": 1}

    check = tiers.check()
    assert (check.name, check.ok) == ("retry tiers", False)
    assert "orders.retry.30s (2 record(s)), orders.retry.5m (1 record(s))" in check.detail
    assert "RETRY_DELAYS_RETIRED=30,300 (in seconds)" in check.detail


def test_the_worker_reads_the_retired_tiers_too() -> None:
    settings = Settings(order_topic="orders", retry_delays="1,60", retry_delays_retired="30")
    assert read_tiers(settings) == {"orders.retry.1s", "orders.retry.1m", "orders.retry.30s"}


class Answer:
    """A ``DescribeGroups`` answer of one group."""

    def __init__(self, state: str, error_code: int, topics: list[list[str]]) -> None:
        members = [
            {"member_metadata": ConsumerProtocolMemberMetadata(0, t, b"").encode() if t else b""}
            for t in topics
        ]
        self.group = {"error_code": error_code, "state": state, "members": members}

    def to_object(self) -> dict[str, object]:
        return {"groups": [self.group]}


def test_a_stable_group_says_what_its_members_read() -> None:
    answer = Answer("Stable", 0, [["orders", "orders.retry.1s"], ["orders", "orders.retry.30s"]])
    assert subscribed([answer]) == {"orders", "orders.retry.1s", "orders.retry.30s"}
    assert subscribed([Answer("Empty", 0, [])]) == set()


@pytest.mark.parametrize(
    ("state", "error_code"),
    [("PreparingRebalance", 0), ("CompletingRebalance", 0), ("Stable", 15)],
)
def test_a_group_rebalancing_or_refused_tells_nothing(state: str, error_code: int) -> None:
    with pytest.raises(GroupUnsettled):
        subscribed([Answer(state, error_code, [[]])])
