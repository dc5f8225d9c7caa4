"""What every scenario of one run shares, and the one way a worker is run and measured."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from app.demo.broker import LocalBroker
from app.demo.kafka import KafkaCluster
from app.demo.workload import Workload
from bench.cpu import CpuMeter, Spent
from bench.database import BenchDatabase
from bench.monitor import Window, wait_for_assignment, wait_for_events
from bench.options import BenchOptions
from bench.source import fingerprint
from bench.steal import cpu_times, steal_percent
from bench.worker import BenchWorker, WorkerConfig

WORKER_LOG_TAIL_LINES = 40


class BenchError(RuntimeError):
    """A scenario could not be measured; the message says why (with the worker's last words)."""


@dataclass(frozen=True)
class Measured:
    """A worker's run: its window, peak memory and the transactions it committed."""

    window: Window
    peak_rss_mb: float | None
    transactions: int | None
    load_average: float  # the machine's 1-minute load average when the window closed
    steal_percent: float | None  # CPU time the hypervisor gave away, start to window close
    code: str  # fingerprint of the framework's source when the worker started
    spent: Spent | None = None  # CPU of the worker and its database backends, in the window

    @property
    def tx_per_1k(self) -> float | None:
        """Committed transactions per 1,000 events."""
        if self.transactions is None:
            return None
        return self.transactions / self.window.events * 1000


@dataclass
class Session:
    """The broker, the database, the workload on its topic, and where the logs go."""

    options: BenchOptions
    broker: LocalBroker | KafkaCluster
    database: BenchDatabase
    workload: Workload
    config: WorkerConfig
    workdir: Path
    tag: str
    console: Console
    redelivery_topic: str | None = None  # the same records again, for the same-group storm

    @property
    def messages(self) -> int:
        """Records on the main topic."""
        return len(self.workload.messages)

    def app_id(self, scenario: str) -> str:
        """A consumer group no earlier scenario (or run) used: it reads the topic from its start."""
        return f"bench-{self.tag}-{scenario}"

    @property
    def prefilter_prefix(self) -> str:
        """``PREFILTER_KEY_PREFIX`` of every Redis-on worker of this run."""
        return f"eo-bench:{self.tag}"

    def worker(self, name: str, env: dict[str, str], app_module: str = "app") -> BenchWorker:
        """A worker (not started yet) logging to ``<workdir>/<name>.log``."""
        return BenchWorker(
            env=env, cwd=self.workdir, log_path=self.workdir / f"{name}.log", app_module=app_module
        )

    def on_topic(self, topic: str) -> WorkerConfig:
        """The worker configuration for another topic."""
        return replace(self.config, topic=topic)

    async def measure(
        self,
        worker: BenchWorker,
        events: int,
        *,
        count_transactions: bool,
        before_events: Callable[[], Awaitable[None]] | None = None,
    ) -> Measured:
        """Start ``worker``, wait until it acknowledged ``events`` events, stop it.

        ``before_events`` runs once the worker has its partitions (the paced
        producer of a latency run). Transactions are counted from just before
        the start to just after the stop, so they include the worker's start-up
        and shutdown, which are a handful.
        """
        before = await self.database.transactions() if count_transactions else None
        topic = worker.env["ORDER_TOPIC"]
        code = fingerprint()
        cpu_before = cpu_times()
        worker.start()
        try:
            assert worker.pid is not None
            meter = CpuMeter(worker.pid, self.database)
            if before_events is not None:
                await wait_for_assignment(worker.web_port, topic, worker.check_alive)
                await before_events()
            window = await wait_for_events(
                worker.web_port, topic, events, worker.check_alive, on_open=meter.open
            )
            spent = await meter.close()
            rss, load = worker.peak_rss_mb(), os.getloadavg()[0]
            stolen = steal_percent(cpu_before, cpu_times())
        except Exception as exc:
            tail = worker.log_tail(WORKER_LOG_TAIL_LINES)
            raise BenchError(f"{worker.log_path.stem}: {exc}\n--- worker log ---\n{tail}") from exc
        finally:
            worker.stop()
        after = await self.database.transactions() if count_transactions else None
        transactions = None if before is None or after is None else after - before
        return Measured(window, rss, transactions, load, stolen, code, spent)
