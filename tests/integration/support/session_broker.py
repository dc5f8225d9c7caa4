"""One broker for the whole test run, shared by every pytest-xdist process.

``TEST_BROKER`` picks its kind: ``kafka`` (Apache Kafka, the default and what CI
runs) or ``tansu``. The first process that needs it starts it under a file lock in
the run's temporary folder and writes ``broker.json`` there; the others find it
running and use it. The controlling process stops it when the run ends
(``stop_shared_broker``, from the root conftest's ``pytest_sessionfinish``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

from app.demo.broker import LocalBroker
from app.demo.kafka import KafkaCluster
from app.demo.local import BROKER_KINDS, local_broker

_STATE = "broker.json"


def broker_kind() -> str:
    """The kind of broker the tests run on (``TEST_BROKER``, default ``kafka``)."""
    kind = os.environ.get("TEST_BROKER", "kafka")
    if kind not in BROKER_KINDS:
        raise ValueError(f"TEST_BROKER={kind!r}: one of {', '.join(BROKER_KINDS)}")
    return kind


def relay_idempotent() -> bool:
    """Whether the tests' relays run idempotent: on Kafka yes (the default), on Tansu 0.6 no."""
    return broker_kind() == "kafka"


@dataclass(frozen=True)
class SharedBroker:
    """Where the run's broker listens."""

    kind: str
    url: str
    bootstrap: str


def run_root(basetemp: Path) -> Path:
    """The folder every process of this run shares (xdist gives each worker a child of it)."""
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


def shared_broker(root: Path) -> SharedBroker:
    """The run's broker, started by the first caller; ``RuntimeError`` if it cannot start."""
    with open(root / "broker.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = root / _STATE
        if state.exists():
            known = json.loads(state.read_text())
            if _alive(known["pid"]) and _listening(known["bootstrap"]):
                return SharedBroker(known["kind"], known["url"], known["bootstrap"])
            _stop(known)
        kind = broker_kind()
        broker = local_broker(kind, log_path=root / f"{kind}-broker.log")
        broker.start()
        known = {
            "kind": kind,
            "url": broker.url,
            "bootstrap": broker.bootstrap,
            "pid": broker.pid,
            "workdir": _workdir(broker),
        }
        state.write_text(json.dumps(known))
        return SharedBroker(kind, broker.url, broker.bootstrap)


def stop_shared_broker(root: Path) -> None:
    """Stop the run's broker, if one was started."""
    state = root / _STATE
    if state.exists():
        _stop(json.loads(state.read_text()))
        state.unlink()


def _workdir(broker: LocalBroker | KafkaCluster) -> str | None:
    if isinstance(broker, KafkaCluster):
        folder = broker.nodes[0].data_dir
        return str(folder) if folder else None
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _listening(bootstrap: str) -> bool:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _stop(known: dict[str, object]) -> None:
    pid = known.get("pid")
    if isinstance(pid, int) and _alive(pid):
        os.kill(pid, signal.SIGKILL)
    workdir = known.get("workdir")
    if isinstance(workdir, str):
        shutil.rmtree(workdir, ignore_errors=True)
