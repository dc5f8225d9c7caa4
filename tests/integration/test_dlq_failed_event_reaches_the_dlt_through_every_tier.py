"""A failing event goes through every retry tier to the DLT, and ``python -m dlq`` shows it.

Contract: with ``RETRY_DELAYS=0.5,1``, an event whose handler keeps raising
is tried three times: on the main topic, on ``<topic>.retry.0.5s`` and on
``<topic>.retry.1s``, each retry record naming the consumer, attempt and deployment;
then it lands once on ``<topic>.DLT`` with its original key, value and
headers and exactly the dead-letter headers (provenance, deployment, reason, exception type
and message, no stack trace under the default ``FAILURE_DETAIL``, attempts,
failure times, event and aggregate, consumer). Its ``failed_event``
row says ``dead`` after 3 attempts; the aggregate's next version waits
(parked) and other aggregates apply. ``list --json`` and ``show`` report it; ``list``
with a ``--consumer`` one letter off the one that failed names it (did you mean).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from dlq import headers as h
from dlq.dead import parse_time
from dlq.topics import dlt_topic, retry_topic
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE,
    TRACE,
    DlqCommand,
    a_payment_dies,
    failures,
    records,
)
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_main_then_each_tier_then_the_dlt_with_exact_headers(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    stream = topic.stream
    death = await a_payment_dies(stream, workers, database_url, tmp_path / "fixed")
    original = next(
        r for r in await records(stream, stream.topic) if (r.partition, r.offset) == death.paid_at
    )

    tiers = [await records(stream, retry_topic(stream.topic, d)) for d in (0.5, 1)]
    for attempt, (tier_record,) in enumerate(tiers, start=1):
        assert (tier_record.key, tier_record.value) == (original.key, original.value)
        assert tier_record.headers[0] == TRACE
        assert tier_record.header(h.RETRY_CONSUMER_GROUP) == PROBE.encode()
        assert tier_record.header(h.RETRY_ATTEMPT) == str(attempt).encode()
        assert tier_record.header(h.DLT_APP_ID) == stream.app_id.encode()

    dead = death.dead
    assert dead.topic == dlt_topic(stream.topic)
    assert (dead.key, dead.value) == (original.key, original.value)
    names = [name for name, _ in dead.headers]
    assert names == [
        TRACE[0],
        h.DLT_ORIGINAL_TOPIC,
        h.DLT_ORIGINAL_PARTITION,
        h.DLT_ORIGINAL_OFFSET,
        h.DLT_ORIGINAL_TIMESTAMP,
        h.DLT_APP_ID,
        h.DLT_REASON,
        h.DLT_EXCEPTION_TYPE,
        h.DLT_EXCEPTION_MESSAGE,
        h.DLT_ATTEMPTS,
        h.DLT_FIRST_FAILURE_AT,
        h.DLT_LAST_FAILURE_AT,
        h.DLT_CONSUMER_GROUP,
        h.DLT_EVENT_ID,
        h.DLT_EVENT_TYPE,
        h.DLT_AGGREGATE_TYPE,
        h.DLT_AGGREGATE_ID,
        h.DLT_AGGREGATE_VERSION,
    ]
    text = {name: value.decode() for name, value in dead.headers}
    assert dead.headers[0] == TRACE
    assert {name: text[name] for name in names if name not in _VARYING} == {
        h.DLT_ORIGINAL_TOPIC: stream.topic,
        h.DLT_ORIGINAL_PARTITION: str(original.partition),
        h.DLT_ORIGINAL_OFFSET: str(original.offset),
        h.DLT_ORIGINAL_TIMESTAMP: str(original.timestamp_ms),
        h.DLT_APP_ID: stream.app_id,
        h.DLT_REASON: "retries-exhausted",
        h.DLT_EXCEPTION_TYPE: "tests.integration.support.dlq_probe.ProbeFailure",
        h.DLT_EXCEPTION_MESSAGE: f"dlq-probe refuses the payment of {FAIL_USER}",
        h.DLT_ATTEMPTS: "3",
        h.DLT_CONSUMER_GROUP: PROBE,
        h.DLT_EVENT_ID: death.event_id,
        h.DLT_EVENT_TYPE: "OrderPaid",
        h.DLT_AGGREGATE_TYPE: "Order",
        h.DLT_AGGREGATE_ID: death.order.order_id,
        h.DLT_AGGREGATE_VERSION: "2",
    }
    first, last = (_when(text[name]) for name in (h.DLT_FIRST_FAILURE_AT, h.DLT_LAST_FAILURE_AT))
    assert (last - first).total_seconds() >= 1.5  # it waited out both tiers

    assert await failures(database_url) == [
        {
            "consumer_group": PROBE,
            "event_id": death.event_id,
            "status": "dead",
            "attempts": 3,
            "reason": "retries-exhausted",
            "decided_by": None,
            "decision_note": None,
        }
    ]
    assert await db.balances() == {"alice": 123}
    assert await db.parked_count() == 1
    assert await db.versions(death.order.order_id) == {PROBE: 1}

    dlq = DlqCommand(stream, database_url)
    listed = await dlq("list", "--json")
    assert listed.code == 0, listed.err
    (row,) = listed.json()
    assert row | {"first_failure_at": None, "last_failure_at": None} == {
        "position": death.position,
        "dlt_topic": dead.topic,
        "dlt_partition": dead.partition,
        "dlt_offset": dead.offset,
        "original_topic": stream.topic,
        "original_partition": original.partition,
        "original_offset": original.offset,
        "consumer": PROBE,
        "reason": "retries-exhausted",
        "exception_type": "tests.integration.support.dlq_probe.ProbeFailure",
        "exception_message": f"dlq-probe refuses the payment of {FAIL_USER}",
        "attempts": 3,
        "first_failure_at": None,
        "last_failure_at": None,
        "event_id": death.event_id,
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": death.order.order_id,
        "aggregate_version": 2,
        "replay_count": 0,
        "status": "dead",
        "decided_by": None,
        "decision_note": None,
        "older_copy": False,
        "waiting": [],
        "app_id": stream.app_id,
        "unpublished": None,
    }
    table = await dlq("list", "--consumer", PROBE)
    assert table.code == 0 and death.position in table.out and death.event_id in table.out
    shown = await dlq("show", death.position)
    assert shown.code == 0, shown.err
    assert f'"userId": "{FAIL_USER}"' in shown.out and "dlt-exception-message" in shown.out
    by_id = await dlq("show", "--event-id", death.event_id)
    assert by_id.code == 0 and by_id.out == shown.out
    nothing = await dlq("list", "--consumer", "points-service")
    assert (nothing.code, nothing.out.strip()) == (1, "")
    assert "no record of" in nothing.err and len(nothing.err.splitlines()) == 1
    assert "did you mean" not in nothing.err
    typo = await dlq("list", "--consumer", PROBE[:-1])  # one letter short of the failed one
    assert typo.code == 1 and f"(did you mean {PROBE!r}?)" in typo.err, typo.err


_VARYING = (TRACE[0], h.DLT_FIRST_FAILURE_AT, h.DLT_LAST_FAILURE_AT)


def _when(text: str) -> datetime:
    moment = parse_time(text)
    assert moment is not None, text
    return moment
