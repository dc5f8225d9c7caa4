"""The one workload the tests send every way a producer writes it (three spellings and the
real Debezium engine), so that their final states can be compared with one expectation."""

from __future__ import annotations

from app.demo.spellings import numbered
from app.demo.workload import Workload, generate


def producers_workload() -> Workload:
    """About 550 records over 240 orders and 30 users: 10% of the events sent twice, 5% of
    the orders with two versions swapped, ids the numbers a producer's sequences give."""
    return numbered(generate(orders=240, users=30, skus=12, seed=15))
