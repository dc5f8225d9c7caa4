"""Relay processes (``python -m app relay``) for integration tests; whatever runs at the end is
killed. Each writes its log to a file under the test's tmp_path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.integration.support.session_broker import relay_idempotent
from tests.integration.support.workers import REPO_ROOT, STOP_TIMEOUT_SECONDS, ChildProcess


class RelayProcess(ChildProcess):
    """One running relay; ``kill`` is a crash (SIGKILL), ``stop`` a graceful shutdown."""

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        """SIGTERM the relay and wait for it to exit; returns its exit code."""
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def describe(self) -> str:
        """State and log path, for assertion messages."""
        state = "running" if self.alive else f"exited with {self.process.returncode}"
        return f"relay {self.name} ({state}), log {self.log_path}"


class Relays:
    """Starts relays for one test; ``kill_all`` at the end."""

    def __init__(self, run_dir: Path) -> None:
        self._run_dir = run_dir
        self.started: list[RelayProcess] = []

    def start(
        self, database_url: str, broker_url: str, env: Mapping[str, str] | None = None
    ) -> RelayProcess:
        """Start ``python -m app relay`` on ``database_url`` and ``broker_url``."""
        name = f"r{len(self.started) + 1}"
        self._run_dir.mkdir(parents=True, exist_ok=True)
        log_path = self._run_dir / f"{name}.log"
        pythonpath = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        relay_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(pythonpath),
            "PYTHONUNBUFFERED": "1",
            "DATABASE_URL": database_url,
            "BROKER_URL": broker_url,
            "RELAY_METRICS_PORT": "0",
            # Tansu 0.6 refuses idempotent producers.
            "RELAY_IDEMPOTENT": str(relay_idempotent()).lower(),
            **(env or {}),
        }
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "app", "relay"],
                cwd=self._run_dir,
                env=relay_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        relay = RelayProcess(name, process, log_path)
        self.started.append(relay)
        return relay

    def run_to_exit(
        self,
        database_url: str,
        broker_url: str,
        within: float,
        env: Mapping[str, str] | None = None,
    ) -> tuple[int | None, str]:
        """Start a relay and give it ``within`` seconds to end: its exit code (None: it still
        ran, and was killed) and its log."""
        relay = self.start(database_url, broker_url, env)
        try:
            code = relay.exit_code(within)
        finally:
            relay.kill()
        return code, relay.log()

    def kill_all(self) -> None:
        """SIGKILL every relay still running."""
        for relay in self.started:
            relay.kill()
