"""Real worker processes (``python -m faust -A app worker``) for integration tests.

Each worker writes its log to a file under the test's tmp_path; the integration
conftest prints the tail of every worker's log when a test fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.demo.broker import free_port
from tests.integration.support.session_broker import relay_idempotent

REPO_ROOT = Path(__file__).resolve().parents[3]

# Tansu holds a group join for half the session timeout: a short timeout makes
# the first assignment (about 3 s) and the rebalance after a kill quick.
SESSION_TIMEOUT_SECONDS = 6
STOP_TIMEOUT_SECONDS = 30
# aiokafka's line at the end of every rebalance, followed by faust's table of partitions.
_ASSIGNED = "Setting newly assigned partitions"


@dataclass(frozen=True, slots=True)
class Stream:
    """The test's own topic and consumer group, so tests never share broker state."""

    broker_url: str
    bootstrap: str
    topic: str
    app_id: str
    partitions: int


@dataclass
class ChildProcess:
    """A process a test started, logging to ``log_path``; ``kill`` is a crash (SIGKILL)."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    @property
    def alive(self) -> bool:
        """True while the process has not exited."""
        return self.process.poll() is None

    def exit_code(self, within: float) -> int | None:
        """The exit code, once the process has ended within ``within`` seconds; None while it
        still runs then (the caller kills it, and its log says where it waited)."""
        try:
            return self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the process, as a crash or an OOM kill would, and reap it."""
        if self.alive:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_TIMEOUT_SECONDS)

    def log(self) -> str:
        """Everything the process has logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


@dataclass
class WorkerProcess(ChildProcess):
    """One running worker; ``kill`` is a crash (SIGKILL), ``stop`` a graceful shutdown."""

    web_port: int
    env: dict[str, str] = field(repr=False)

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        """SIGTERM the worker and wait for it to exit; returns its exit code.

        A worker that ignores SIGTERM for ``timeout`` seconds is killed and the
        stop raises, because a worker that cannot shut down is a bug.
        """
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"worker {self.name} did not exit within {timeout}s of SIGTERM"
            ) from None

    def tail(self, lines: int = 80) -> str:
        """The last ``lines`` lines of the log."""
        return "\n".join(self.log().splitlines()[-lines:])

    def assigned_partitions(self, topic: str) -> set[int] | None:
        """The partitions of ``topic`` in the last assignment the worker logged (None: none yet)."""
        blocks = self.log().split(_ASSIGNED)
        if len(blocks) < 2:
            return None
        table = blocks[-1].split(" for group ", 1)[0]
        row = re.search(rf"^\|\s*{re.escape(topic)}\s*\|\s*\{{([^}}]*)\}}", table, re.MULTILINE)
        return _partition_set(row.group(1)) if row else set()

    def describe(self) -> str:
        """State and log path, for assertion messages (the report has the log's tail)."""
        state = "running" if self.alive else f"exited with {self.process.returncode}"
        return f"worker {self.name} (pid {self.pid}, {state}), log {self.log_path}"


class Workers:
    """Starts workers for one test and kills whatever is still running at the end."""

    def __init__(self, stream: Stream, run_dir: Path) -> None:
        self.stream = stream
        self._run_dir = run_dir
        self.started: list[WorkerProcess] = []

    def start(
        self,
        database_url: str,
        *,
        name: str | None = None,
        handler_modules: str = "handlers",
        env: Mapping[str, str] | None = None,
        web_port: int | None = None,
    ) -> WorkerProcess:
        """Start a worker on the test's topic and group against ``database_url`` (its web
        server on ``web_port``, by default a free one)."""
        name = name or f"w{len(self.started) + 1}"
        workdir = self._run_dir / name
        workdir.mkdir(parents=True, exist_ok=True)
        web_port = web_port or free_port()
        worker_env = self._environment(database_url, handler_modules, env)
        worker_env["TMPDIR"] = str(workdir)  # anything the worker keeps on disk stays in tmp_path
        log_path = self._run_dir / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "faust",
                    "-A",
                    "app",
                    "worker",
                    "-l",
                    "info",
                    "--web-host",
                    "127.0.0.1",
                    "--web-port",
                    str(web_port),
                ],
                cwd=workdir,
                env=worker_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(name, process, log_path, web_port, worker_env)
        self.started.append(worker)
        return worker

    def running(self) -> list[WorkerProcess]:
        """The workers that have not exited."""
        return [worker for worker in self.started if worker.alive]

    def kill_all(self) -> None:
        """SIGKILL every worker still running (the test's teardown)."""
        for worker in self.started:
            worker.kill()

    def _environment(
        self, database_url: str, handler_modules: str, extra: Mapping[str, str] | None
    ) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if key != "REDIS_URL"  # a worker uses Redis only when a test asks for it
        }
        pythonpath = [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        env.update(
            PYTHONPATH=os.pathsep.join(pythonpath),  # so HANDLER_MODULES can name tests.*
            PYTHONUNBUFFERED="1",
            BROKER_URL=self.stream.broker_url,
            DATABASE_URL=database_url,
            ORDER_TOPIC=self.stream.topic,
            ORDER_TOPIC_PARTITIONS=str(self.stream.partitions),
            APP_ID=self.stream.app_id,
            HANDLER_MODULES=handler_modules,
            BATCH_SIZE="100",
            BATCH_WAIT_SECONDS="0.05",
            BROKER_SESSION_TIMEOUT_SECONDS=str(SESSION_TIMEOUT_SECONDS),
            MIGRATE_ON_START="true",
            # Tansu 0.6 answers aiokafka's InitProducerId with an error (see app.outbox.broker).
            RELAY_IDEMPOTENT=str(relay_idempotent()).lower(),
        )
        env.update(extra or {})
        return env


def _partition_set(text: str) -> set[int]:
    """``"0-2, 5"`` (faust's rendering of a partition set) -> ``{0, 1, 2, 5}``."""
    partitions: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        partitions.update(range(int(low), int(high or low) + 1))
    return partitions


CONFIGURATION_ERROR = "effectively-once: configuration error: "


def the_one_line(worker: WorkerProcess, within: float = 30) -> str:
    """The worker ended with code 2 and logged one configuration error, no traceback:
    that line."""
    code = worker.exit_code(within)
    log = worker.log()
    assert code == 2, log
    assert "Traceback" not in log, log
    lines = log.strip().splitlines()
    assert len(lines) == 1, log
    assert lines[0].startswith(CONFIGURATION_ERROR), log
    return lines[0]
