"""``python -m app broker`` runs a local broker and prints the settings to use it.

Contract: on the port asked for, it starts Apache Kafka (the default) or Tansu
(``--kind tansu``), prints ``export BROKER_URL=...`` (and ``RELAY_IDEMPOTENT=false``
for Tansu only), takes a topic and a record, and stops on SIGTERM with exit code 0.
A port already in use is one line on stderr and exit code 2, no traceback.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.demo.broker import free_port
from app.demo.envelopes import Message
from app.demo.produce import ensure_topic, produce
from app.kafka_clients import KafkaClients
from dlq.broker import read_topic
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
async def test_the_broker_runs_until_sigterm_and_says_how_to_use_it(
    kind: str, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "broker.out"
    process = _start(kind, port, log)
    try:
        said = await eventually(
            lambda: asyncio.to_thread(log.read_text),
            lambda text: "export BROKER_URL" in text or process.poll() is not None,
            what="the broker to print its settings",
            within=90,
        )
        assert f"export BROKER_URL=kafka://127.0.0.1:{port}" in said, said
        assert ("RELAY_IDEMPOTENT=false" in said) == (kind == "tansu"), said
        bootstrap = f"127.0.0.1:{port}"
        await ensure_topic(bootstrap, "dev-topic", 1)
        await produce(bootstrap, "dev-topic", [Message(b"k", b"v", ())])
        records = await read_topic(KafkaClients(f"kafka://{bootstrap}"), "dev-topic")
        assert [(r.key, r.value) for r in records] == [(b"k", b"v")]
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    assert code == 0, log.read_text()


def _start(kind: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "broker", "--kind", kind, "--port", str(port)],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "app", "broker", "--port", str(port)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"effectively-once broker: port {port} is in use on 127.0.0.1 (another broker?); "
        "choose one with --port"
    )
