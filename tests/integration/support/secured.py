"""For the tests on the secured listeners: a stream whose clients connect through one of
them, and ``python -m app`` commands run with its settings.

The test's own clients (creating topics, producing, reading back) use the broker's
PLAINTEXT listener (``Stream.bootstrap``); the worker, relay and commands under test get
only the secured listener's ``BROKER_URL`` and settings, and that port speaks nothing
else.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from app.demo.secure_kafka import SecureKafka
from tests.integration.support.workers import REPO_ROOT, Stream

PARTITIONS = 4
COMMAND_TIMEOUT_SECONDS = 60


def secured_stream(broker: SecureKafka, listener: str) -> Stream:
    """A topic and group of the test's own, ``BROKER_URL`` on ``listener``."""
    tag = uuid.uuid4().hex[:10]
    return Stream(
        broker_url=broker.settings(listener)["BROKER_URL"],
        bootstrap=broker.bootstrap,
        topic=f"orders-{tag}",
        app_id=f"eo-test-{tag}",
        partitions=PARTITIONS,
    )


@dataclass(frozen=True)
class Finished:
    """A command that ran to its end."""

    code: int
    out: str
    err: str
    seconds: float


async def run_app(*args: str, env: Mapping[str, str]) -> Finished:
    """``python -m app ARGS`` with ``env`` over this process's environment."""
    started = asyncio.get_running_loop().time()
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "app", *args],
        env={**os.environ, "PYTHONPATH": _pythonpath(), **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
    )
    seconds = asyncio.get_running_loop().time() - started
    return Finished(done.returncode, done.stdout, done.stderr, seconds)


def _pythonpath() -> str:
    return os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
