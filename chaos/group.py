"""Wait until the workers have joined their group and share every partition."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

from chaos.workers import WorkerPool

POLL_SECONDS = 0.5
HTTP_TIMEOUT_SECONDS = 2.0
JOIN_TIMEOUT_SECONDS = 120.0


async def wait_until_assigned(
    workers: WorkerPool, topic: str, partitions: int, within: float = JOIN_TIMEOUT_SECONDS
) -> None:
    """Return once every partition of ``topic`` is assigned to one of the running workers
    (faust's ``/assignment/`` page); ``TimeoutError`` otherwise."""
    deadline = time.monotonic() + within
    everything = set(range(partitions))
    while True:
        owned: set[int] = set()
        for port in workers.web_ports().values():
            owned |= await asyncio.to_thread(_assigned, port, topic)
        if owned == everything:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"after {within:.0f} s the workers own partitions {sorted(owned)} of {topic}"
            )
        await asyncio.sleep(POLL_SECONDS)


def _assigned(port: int, topic: str) -> set[int]:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/assignment/", timeout=HTTP_TIMEOUT_SECONDS
        ) as response:
            assignment = json.loads(response.read())
    except (OSError, ValueError):
        return set()
    return set(assignment.get("actives", {}).get(topic, []))
