"""The worker's /metrics counts exactly what happened.

Contract: a real worker serves ``/metrics`` on its web port. After it committed
a known mix of records, ``effectively_once_events_total`` moved by exactly one
per consumer and outcome (applied, duplicate, parked; poison once, for no
consumer), duplicates are attributed to whoever caught them (the database, or
the Redis prefilter for a redelivery it already knew), the poison record to the
DLT with its reason, the batch-size histogram summed every record, and within a
sampling interval the parking gauges show the parked event, its aggregate and
its age. Every metric the Grafana dashboard and the alerts reference is in the
live scrape. With ``LOG_FORMAT=json`` the outcome log lines are JSON objects
carrying eventId, consumer and outcome.
"""

from __future__ import annotations

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.demo.envelopes import encode
from tests.integration.support.http import get, metric_families, ready
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import CONSUMERS
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import WorkerProcess, Workers
from tests.metric_names import referenced_names, series_names

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """(series name, labels) -> value, for every sample of a scrape."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(scrape: Samples, name: str, **labels: str) -> float:
    return scrape.get((name, frozenset(labels.items())), 0.0)


async def scrape(worker: WorkerProcess) -> Samples:
    status, body = await get(worker, "/metrics")
    assert status == 200
    return samples(body)


async def test_counters_move_by_exactly_what_happened(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    worker = workers.start(database_url, env={"LOG_FORMAT": "json"})
    await ready(worker)
    before = await scrape(worker)

    alice = Order("alice", 12_345)
    bob = Order("bob", 5_000)
    created, paid = alice.created(), alice.paid()
    early = bob.paid()  # version 2 before version 1: parked for every consumer
    poison = alice.raw(b"\xff not json")
    await topic.send([encode(created), encode(paid), encode(paid), encode(early), poison])
    await topic.drained(workers=[worker])
    after = await scrape(worker)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    events = "effectively_once_events_total"
    for consumer in CONSUMERS:
        assert moved(events, consumer=consumer, outcome="applied", event_type="OrderCreated") == 1
        assert moved(events, consumer=consumer, outcome="applied", event_type="OrderPaid") == 1
        assert moved(events, consumer=consumer, outcome="duplicate", event_type="OrderPaid") == 1
        assert moved(events, consumer=consumer, outcome="parked", event_type="OrderPaid") == 1
        duplicates = "effectively_once_duplicates_total"
        assert moved(duplicates, consumer=consumer, source="database") == 1
        assert moved(duplicates, consumer=consumer, source="prefilter") == 0
    assert moved(events, consumer="", outcome="poison", event_type="") == 1
    assert moved("effectively_once_dlt_records_total", consumer="", reason="undecodable") == 1
    total = sum(v for (name, _), v in after.items() if name == events)
    assert total - sum(v for (name, _), v in before.items() if name == events) == 13
    assert moved("effectively_once_batch_size_sum") == 5
    assert value(after, "effectively_once_oldest_unprocessed_age_seconds") == 0
    assert value(after, "effectively_once_paused") == 0
    lag = {
        (dict(labels)["topic"], dict(labels)["partition"]): v
        for (name, labels), v in after.items()
        if name == "effectively_once_consumer_lag"
    }
    main = topic.stream.topic
    assert {p for t, p in lag if t == main} == {str(p) for p in range(topic.stream.partitions)}
    assert all(t == main or t.startswith(f"{main}.retry.") for t, _ in lag), lag
    assert all(v == 0 for v in lag.values()), lag

    async def parking() -> Samples:
        return await scrape(worker)

    def shows_bob_parked(s: Samples) -> bool:
        return all(
            value(s, "effectively_once_parked_events", consumer=c) == 1
            and value(s, "effectively_once_parked_aggregates", consumer=c) == 1
            and value(s, "effectively_once_oldest_parked_event_age_seconds", consumer=c) > 0
            for c in CONSUMERS
        )

    await eventually(
        parking, shows_bob_parked, what="the parking gauges", within=30, workers=[worker]
    )

    lines = [orjson.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
    parked_lines = [line for line in lines if line.get("outcome") == "parked"]
    assert {line["consumer"] for line in parked_lines} == set(CONSUMERS)
    assert all(line["eventId"] == early["eventId"] for line in parked_lines)
    assert all({"ts", "level", "logger", "message"} <= line.keys() for line in lines)


async def test_every_metric_the_dashboards_reference_is_scraped(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    worker = workers.start(database_url)
    await ready(worker)
    exposed = series_names(await metric_families(worker))
    for file_name, names in referenced_names().items():
        assert names <= exposed, f"{file_name}: missing from /metrics: {names - exposed}"


async def test_duplicates_the_redis_prefilter_caught_are_attributed_to_it(
    topic: OrderTopic, workers: Workers, database_url: str, redis_url: str
) -> None:
    worker = workers.start(database_url, env={"REDIS_URL": redis_url})
    await ready(worker)
    created = Order("carol", 1_000).created()
    await topic.send([encode(created)])
    await topic.drained(workers=[worker])
    before = await scrape(worker)
    await topic.send([encode(created)])  # a later batch: Redis already knows it
    await topic.drained(workers=[worker])
    after = await scrape(worker)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    for consumer in CONSUMERS:
        duplicates = "effectively_once_duplicates_total"
        assert moved(duplicates, consumer=consumer, source="prefilter") == 1
        assert moved(duplicates, consumer=consumer, source="database") == 0
    assert moved("effectively_once_prefilter_hits_total") == len(CONSUMERS)
    assert value(after, "effectively_once_prefilter_circuit_open") == 0
