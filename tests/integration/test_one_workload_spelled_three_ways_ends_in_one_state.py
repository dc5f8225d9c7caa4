"""One workload, sent with string ids, with integer ids, or as Debezium's outbox router
emits it, ends in the same balances and stock on every database.

Contract: the workload (orders with duplicates and swapped versions, ids the
numbers a producer's sequences give) is sent three times through the real
broker to one worker on PostgreSQL, MariaDB or SQLite, each copy with ids and
skus of its own and spelled its own way: every id a JSON string; every id a
JSON integer with the aggregate in the value or only in the key (raw or
JSON-quoted) and the aggregate type in the value or left to the default; or
the router's records (six value shapes, three header converters, event id,
type and aggregate type in headers for some orders). The copies are
interleaved, so one batch holds every spelling. Each copy ends in exactly the
balances and stock its events mean, the same for all three; every order is
the one aggregate ``ORDER <order id>``; nothing is parked or dead-lettered, and
each consumer has one dedup record per distinct event.
The fourth way, the real Debezium engine, is
``test_debezium_engine_records_apply_as_the_workload_means``.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import chain, zip_longest

import pytest

from app.demo.spellings import Spelling, in_series, numbered, series_zero, spell
from app.demo.workload import generate
from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import CONSUMERS, Database
from tests.integration.support.workers import Workers
from tests.integration.support.workloads import WORKLOAD

pytestmark = pytest.mark.integration

SPELLINGS = list(Spelling)


def by_series(table: dict[str, int]) -> dict[int, dict[str, int]]:
    """A table of user balances or sku stock, split by the series that wrote it, each named as
    series 0 names it."""
    split: dict[int, dict[str, int]] = defaultdict(dict)
    for name, value in table.items():
        split[in_series(name)][series_zero(name)] = value
    return dict(split)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_state_is_what_the_events_mean_however_they_are_spelled(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    copies = [numbered(generate(**WORKLOAD), series) for series in range(len(SPELLINGS))]
    sent = [spell(copy, spelling) for copy, spelling in zip(copies, SPELLINGS, strict=True)]
    expected = copies[0].expected
    worker = workers.start(database_url)

    await topic.send(m for m in chain.from_iterable(zip_longest(*sent)) if m is not None)
    await topic.drained(workers=[worker])

    assert worker.alive
    every_spelling = dict.fromkeys(range(len(SPELLINGS)))
    assert by_series(await db.balances()) == {s: expected.points for s in every_spelling}
    assert by_series(await db.reserved()) == {s: expected.reserved for s in every_spelling}
    assert await db.notification_count() == len(SPELLINGS) * expected.notifications
    events = len(SPELLINGS) * expected.distinct_events
    assert await db.consumed_counts() == dict.fromkeys(CONSUMERS, events)
    assert (await db.parked_count(), await db.failures()) == (0, [])
    # Every order is one aggregate, however its key and value named it.
    orders = {plan.order_id for copy in copies for plan in copy.plans}
    assert await db.consumed_aggregates() == {("ORDER", order) for order in orders}
