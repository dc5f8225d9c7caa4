"""Talk to a worker's web port (/metrics, /health, /ready), or a relay's."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.support.waiting import eventually
from tests.integration.support.workers import WorkerProcess

REQUEST_TIMEOUT_SECONDS = 5


async def get(worker: WorkerProcess, path: str) -> tuple[int, str]:
    """``GET path`` on the worker's web port: status and body."""
    return await get_at(worker.web_port, path)


async def get_json(worker: WorkerProcess, path: str) -> tuple[int, Any]:
    """``GET path``, body decoded from JSON."""
    return await get_json_at(worker.web_port, path)


async def get_at(port: int, path: str) -> tuple[int, str]:
    """``GET path`` on ``port`` of this host (a worker's, a relay's): status and body."""
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def get_json_at(port: int, path: str) -> tuple[int, Any]:
    """``get_at``, body decoded from JSON."""
    status, body = await get_at(port, path)
    return status, orjson.loads(body)


async def metric_families(worker: WorkerProcess) -> list[Metric]:
    """The parsed families of one scrape of ``/metrics``."""
    status, body = await get(worker, "/metrics")
    assert status == 200, body
    return list(text_string_to_metric_families(body))


async def ready(worker: WorkerProcess, within: float = 60) -> None:
    """Wait until ``/ready`` answers 200 (database up, partitions assigned)."""
    await readiness_is(worker, 200, within=within)


async def readiness_is(worker: WorkerProcess, status: int, *, within: float) -> Any:
    """Wait until ``/ready`` answers ``status``; returns its JSON body."""

    async def probe() -> tuple[int, Any]:
        return await get_json(worker, "/ready")

    _, body = await eventually(
        probe,
        lambda answer: answer[0] == status,
        what=f"/ready to answer {status}",
        within=within,
        workers=[worker],
    )
    return body


async def sample(worker: WorkerProcess, name: str, **labels: str) -> float | None:
    """The value of the series ``name{labels}`` in one scrape of ``/metrics`` (``None``: absent)."""
    for family in await metric_families(worker):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return None


async def ready_fails_on(worker: WorkerProcess, check: str, *, within: float) -> Any:
    """Wait until ``/ready`` answers 503 with ``check`` its one failed check (the worker's
    start done); returns its JSON body."""
    _, body = await eventually(
        lambda: get_json(worker, "/ready"),
        lambda answer: answer[0] == 503 and answer[1]["failed"] == [check],
        what=f"/ready to fail on {check} alone",
        within=within,
        workers=[worker],
    )
    return body
