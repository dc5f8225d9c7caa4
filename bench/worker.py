"""A worker process for one scenario: the framework (``-A app``) or the bare agent."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.demo.worker import WorkerProcess

# The checkout: bench is not installed (the wheel carries no bench), and its workers
# import bench.bare_app, and the framework the bench measures, from here.
REPO_ROOT = Path(__file__).resolve().parents[1]

SESSION_TIMEOUT_SECONDS = 6  # Tansu holds a group join for half of it: a quick first assignment


@dataclass(frozen=True)
class WorkerConfig:
    """What every scenario's worker shares: the broker, the topic and the batching."""

    broker_url: str
    topic: str
    partitions: int
    batch_size: int
    batch_wait: float
    relay_idempotent: bool = True  # False on Tansu 0.6, which refuses idempotent producers


def worker_env(
    config: WorkerConfig,
    *,
    app_id: str,
    database_url: str = "",
    consumers: Sequence[str] = (),
    redis_url: str = "",
    prefilter_prefix: str = "",
) -> dict[str, str]:
    """The environment of a worker consuming ``config.topic`` from its start as group ``app_id``.

    ``REDIS_URL`` is always set, empty meaning "off", so that a ``REDIS_URL`` in the
    caller's own environment cannot switch the prefilter on behind our back;
    ``prefilter_prefix`` puts the prefilter's keys under the bench's own prefix.
    The schema is migrated once by the bench, not by each worker, so that no
    migration transaction lands in a scenario's count.
    """
    pythonpath = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {
        "PYTHONPATH": os.pathsep.join(pythonpath),
        "BROKER_URL": config.broker_url,
        "ORDER_TOPIC": config.topic,
        "ORDER_TOPIC_PARTITIONS": str(config.partitions),
        "APP_ID": app_id,
        "DATABASE_URL": database_url,
        "HANDLER_MODULES": "handlers",  # the example consumers
        "CONSUMERS": ",".join(consumers),  # empty: all of them
        "REDIS_URL": redis_url,
        "BATCH_SIZE": str(config.batch_size),
        "BATCH_WAIT_SECONDS": str(config.batch_wait),
        "BROKER_SESSION_TIMEOUT_SECONDS": str(SESSION_TIMEOUT_SECONDS),
        "MIGRATE_ON_START": "false",
        "RELAY_IDEMPOTENT": str(config.relay_idempotent).lower(),
        # faust's monitor at http://127.0.0.1:<web port>/ is how the bench follows progress.
        "APP_WEB_STATS_ENABLED": "true",
    }
    if prefilter_prefix:
        env["PREFILTER_KEY_PREFIX"] = prefilter_prefix
    return env


@dataclass
class BenchWorker(WorkerProcess):
    """``WorkerProcess`` for any faust app module, with its peak memory."""

    app_module: str = "app"

    @property
    def command(self) -> list[str]:
        """``python -m faust -A <app_module> worker ...``."""
        command = super().command
        command[command.index("-A") + 1] = self.app_module
        return command

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        return None if self._process is None else self._process.pid

    def peak_rss_mb(self) -> float | None:
        """The process's peak resident set (``VmHWM``) in MiB, or None once it has exited."""
        if self._process is None:
            return None
        try:
            with open(f"/proc/{self._process.pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024  # the kernel reports kB
        except OSError:
            return None
        return None
