"""The soak's worker group: N ``faust -A app worker`` processes kept running like an orchestrator
would, SIGKILLed on the soak's schedule and restarted. (The same pool runs any other
long-lived process of the system, e.g. relays: give it their ``command``.)

Each slot (``w1``, ``w2``, ...) appends every incarnation's output to one log file,
each start marked. A worker that exits without being killed by the soak is a
finding: it is recorded with its exit code and last log lines, then restarted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.demo.worker import WorkerProcess

RESTART_AFTER_KILL_SECONDS = 1.0
RESTART_AFTER_EXIT_SECONDS = 2.0
STACKS_SECONDS = 3.0  # for a worker that ignored SIGTERM to write its stacks before SIGKILL
SUPERVISE_SECONDS = 0.5
LOG_TAIL_LINES = 30


@dataclass
class ChaosWorker(WorkerProcess):
    """A worker process the soak can crash; ``program`` replaces the faust worker's command."""

    program: Sequence[str] = ()

    @property
    def command(self) -> list[str]:
        """The faust worker, unless ``program`` says otherwise."""
        return list(self.program) or super().command

    @property
    def pid(self) -> int | None:
        """The process id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def exit_code(self) -> int | None:
        """The exit code once it exited, else None."""
        return self._process.poll() if self._process is not None else None

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would; reaped at once."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.wait()

    def dump_stacks(self) -> None:
        """SIGUSR1: a faust worker writes the stack of every thread and task to its log."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGUSR1)

    def terminate(self) -> None:
        """SIGTERM: the start of a clean shutdown."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit; True if it did."""
        if self._process is None:
            return True
        try:
            self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True


@dataclass(frozen=True)
class Exit:
    """A worker that exited without being told to: when, how, and its last words."""

    slot: str
    at: float
    code: int | None
    log_tail: str


@dataclass
class _Slot:
    name: str
    worker: ChaosWorker
    starts: int = 0
    restart_at: float | None = None  # set once its exit is known: when to start it again


@dataclass
class WorkerPool:
    """``count`` workers with ``env``, their logs and data under ``workdir``."""

    count: int
    env: Mapping[str, str]
    workdir: Path
    program: Sequence[str] = ()  # empty: ``faust -A app worker``
    prefix: str = "w"  # slot names: w1, w2, ...
    clock: float = field(default_factory=time.monotonic)  # the soak's t=0
    exits: list[Exit] = field(default_factory=list)
    _slots: list[_Slot] = field(default_factory=list)

    def start(self) -> None:
        """Start every worker."""
        for n in range(1, self.count + 1):
            name = f"{self.prefix}{n}"
            home = self.workdir / name
            home.mkdir(parents=True, exist_ok=True)
            env = {**self.env, "TMPDIR": str(home)}  # faust's data directory: one per worker
            worker = ChaosWorker(
                env=env, cwd=home, log_path=self.workdir / f"{name}.log", program=self.program
            )
            slot = _Slot(name, worker)
            self._slots.append(slot)
            self._launch(slot)

    @property
    def names(self) -> list[str]:
        """The slots' names."""
        return [slot.name for slot in self._slots]

    def live(self) -> list[str]:
        """The slots whose worker runs now."""
        return [slot.name for slot in self._slots if slot.worker.exit_code is None]

    def web_ports(self) -> dict[str, int]:
        """slot -> web port of the workers running now."""
        return {s.name: s.worker.web_port for s in self._slots if s.worker.exit_code is None}

    def incarnation(self, name: str) -> int:
        """How many times slot ``name`` was started."""
        return next(slot.starts for slot in self._slots if slot.name == name)

    def kill(self, name: str) -> str:
        """SIGKILL the worker of slot ``name``; the supervisor restarts it shortly."""
        slot = next(slot for slot in self._slots if slot.name == name)
        pid = slot.worker.pid
        slot.worker.kill()
        slot.restart_at = time.monotonic() + RESTART_AFTER_KILL_SECONDS
        return f"{name} (pid {pid})"

    async def supervise(self) -> None:
        """Restart what exited (the soak's kills after a second, other exits recorded first)."""
        while True:
            now = time.monotonic()
            for slot in self._slots:
                code = slot.worker.exit_code
                if code is None:
                    continue
                if slot.restart_at is None:  # not the soak's doing
                    tail = slot.worker.log_tail(LOG_TAIL_LINES)
                    self.exits.append(Exit(slot.name, now - self.clock, code, tail))
                    slot.restart_at = now + RESTART_AFTER_EXIT_SECONDS
                if now >= slot.restart_at:
                    self._launch(slot)
            await asyncio.sleep(SUPERVISE_SECONDS)

    def stop(self, grace: float = 20.0) -> dict[str, int | None]:
        """SIGTERM every running worker, SIGKILL what is left after ``grace``; slot -> exit
        code (None: it ignored SIGTERM and was killed, a finding too: its log ends with the
        stack of each of its tasks)."""
        running = [slot for slot in self._slots if slot.worker.exit_code is None]
        for slot in running:
            slot.worker.terminate()
        deadline = time.monotonic() + grace
        codes: dict[str, int | None] = {}
        for slot in running:
            if slot.worker.wait(max(0.1, deadline - time.monotonic())):
                codes[slot.name] = slot.worker.exit_code
            else:
                codes[slot.name] = None
                if not self.program:  # a faust worker: its stacks say where it hangs
                    slot.worker.dump_stacks()
                    slot.worker.wait(STACKS_SECONDS)
                slot.worker.kill()
        return codes

    def _launch(self, slot: _Slot) -> None:
        slot.starts += 1
        slot.restart_at = None
        with open(slot.worker.log_path, "a", encoding="utf-8") as log:
            at = time.monotonic() - self.clock
            log.write(f"\n=== chaos: {slot.name} start #{slot.starts} at t={at:.1f}s ===\n")
        slot.worker.start()
