"""Run one framework worker (``faust -A app worker``) as a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from app.demo.broker import free_port


class WorkerDiedError(RuntimeError):
    """The worker process exited while it was expected to run."""


@dataclass
class WorkerProcess:
    """A worker whose output goes to ``log_path``; ``env`` overrides the inherited environment.

    It runs in ``cwd`` (faust keeps its local data directory there) and in its
    own session, so a Ctrl-C at the terminal reaches only us and we stop it
    in order.
    """

    env: dict[str, str]
    cwd: Path
    log_path: Path
    web_port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = None

    @property
    def command(self) -> list[str]:
        """The command line; ``python -m faust`` so that it works without PATH."""
        return [
            sys.executable, "-m", "faust", "-A", "app", "worker",
            "-l", "info", "--web-port", str(self.web_port), "--web-host", "127.0.0.1",
        ]  # fmt: skip

    def start(self) -> WorkerProcess:
        """Start the worker (returns at once; it connects in the background)."""
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def check_alive(self) -> None:
        """Raise ``WorkerDiedError`` if the worker has exited."""
        if self._process is not None and self._process.poll() is not None:
            raise WorkerDiedError(f"the worker exited with code {self._process.returncode}")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, wait up to ``grace`` seconds for a clean shutdown, then SIGKILL."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the worker's log."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                return "".join(deque(log, maxlen=lines))
        except OSError:
            return ""
