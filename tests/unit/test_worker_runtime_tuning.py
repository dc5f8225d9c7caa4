"""The worker's runtime tuning takes effect: the consumer's fetch wait and the garbage collector.

- ``FETCH_MAX_WAIT_MS`` and ``FETCH_MIN_BYTES`` reach the aiokafka consumer faust builds
  (faust pins 1,500 ms and leaves one byte);
- ``GC_YOUNG_THRESHOLD`` freezes what exists at start-up and sets the young threshold;
  0 leaves the interpreter's collector as it was.
No broker is contacted: the consumer is built, never started.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import faust
import pytest

from app.runtime.garbage import FULL_EVERY, MIDDLE_EVERY, tune_garbage_collector
from app.runtime.transport import set_fetch


async def test_the_fetch_wait_and_size_reach_the_kafka_consumer() -> None:
    app = faust.App("fetch-wait-test", broker="kafka://127.0.0.1:1", web_enabled=False)
    set_fetch(app, 42, 4096)

    kafka_consumer = app.consumer._thread._create_worker_consumer(app.transport)
    try:
        assert kafka_consumer._fetch_max_wait_ms == 42
        assert kafka_consumer._fetch_min_bytes == 4096
    finally:
        await kafka_consumer._client.close()


async def test_without_the_setting_faust_would_wait_1500_ms() -> None:
    app = faust.App("fetch-wait-default", broker="kafka://127.0.0.1:1", web_enabled=False)

    kafka_consumer = app.consumer._thread._create_worker_consumer(app.transport)
    try:
        assert kafka_consumer._fetch_max_wait_ms == 1_500
        assert kafka_consumer._fetch_min_bytes == 1
    finally:
        await kafka_consumer._client.close()


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_the_collector_freezes_start_up_and_collects_young_objects_less_often() -> None:
    tune_garbage_collector(20_000)

    assert gc.get_threshold() == (20_000, MIDDLE_EVERY, FULL_EVERY)
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("restored_gc")
def test_zero_leaves_the_collector_alone() -> None:
    before = gc.get_threshold()
    gc.unfreeze()

    tune_garbage_collector(0)

    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
