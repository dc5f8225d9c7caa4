"""Pauses are counted by dependency, and the worker reads as paused exactly while it is.

Contract: ``pauses.on_pause`` (the pipeline's ``OnPause`` callback) counts a pause
and its planned seconds under the dependency the failure came from: the
exception's own library, else the innermost library frame of its traceback, else
its cause, else ``other``. ``effectively_once_paused`` is 1 while a batch that
paused is in flight, also when the pause happened in a task the batch spawned,
and while other concurrent batches complete; it is 0 once that batch ended.
Start-up work that paused outside any batch is paused until ``resumed``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy.exc
from redis.exceptions import ConnectionError as RedisConnectionError

from app.errors import InfrastructureError
from app.metrics import REGISTRY
from app.monitoring import pauses
from app.monitoring.pauses import dependency_of


def paused() -> float:
    return REGISTRY.get_sample_value("effectively_once_paused") or 0.0


def pause_count(dependency: str) -> float:
    labels = {"dependency": dependency}
    return REGISTRY.get_sample_value("effectively_once_infrastructure_pauses_total", labels) or 0


def raised_inside_a_library() -> BaseException:
    # A bare OSError raised from a frame of module ``asyncpg.fake`` is the database's.
    namespace: dict[str, Any] = {"__name__": "asyncpg.fake"}
    exec("def connect():\n    raise ConnectionRefusedError('refused')\n", namespace)
    try:
        namespace["connect"]()
    except ConnectionRefusedError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: sqlalchemy.exc.OperationalError("SELECT 1", {}, OSError("down")), "database"),
        (lambda: RedisConnectionError("redis down"), "redis"),
        (raised_inside_a_library, "database"),
        (lambda: ConnectionRefusedError("who knows"), "other"),
    ],
)
def test_the_dependency_is_told_from_the_exception(
    make: Callable[[], BaseException], expected: str
) -> None:
    assert dependency_of(make()) == expected


def test_the_dependency_is_found_through_the_cause() -> None:
    try:
        try:
            raise RedisConnectionError("gone")
        except RedisConnectionError as cause:
            raise InfrastructureError("prefilter: gone") from cause
    except InfrastructureError as exc:
        assert dependency_of(exc) == "redis"


async def test_paused_while_the_batch_that_paused_is_in_flight() -> None:
    before = pause_count("redis")
    release = asyncio.Event()
    other_done = asyncio.Event()

    async def pausing_batch() -> None:
        with pauses.batch_scope():
            # The pause happens in a task the batch spawned, as the processor's gather does.
            await asyncio.gather(asyncio.sleep(0))
            await asyncio.create_task(_pause(RedisConnectionError("down")))
            await release.wait()

    async def other_batch() -> None:
        with pauses.batch_scope():
            await asyncio.sleep(0)
        other_done.set()

    first = asyncio.create_task(pausing_batch())
    await asyncio.sleep(0.01)
    assert paused() == 1
    await asyncio.create_task(other_batch())
    await other_done.wait()
    assert paused() == 1  # another batch completing does not resume this one
    release.set()
    await first
    assert paused() == 0
    assert pause_count("redis") - before == 1


async def _pause(exc: BaseException) -> None:
    pauses.on_pause("batch of 1 for c1", exc, 2.0)


def test_start_up_pauses_last_until_resumed() -> None:
    pauses.on_pause("schema migration", ConnectionRefusedError("no database"), 0.5)
    assert paused() == 1
    pauses.resumed()
    assert paused() == 0
