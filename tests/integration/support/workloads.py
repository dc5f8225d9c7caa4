"""The one workload the tests send every way a producer writes it (three spellings and the
real Debezium engine), so that their final states can be compared with one expectation."""

from __future__ import annotations

from typing import Any

from app.demo.spellings import numbered
from app.demo.workload import Workload, generate

# About 550 records over 240 orders and 30 users: 10% of the events sent twice, 5% of the
# orders with two versions swapped.
WORKLOAD: dict[str, Any] = {"orders": 240, "users": 30, "skus": 12, "seed": 15}


def producers_workload() -> Workload:
    """``WORKLOAD`` with the ids a producer's sequences give (series 0)."""
    return numbered(generate(**WORKLOAD))
