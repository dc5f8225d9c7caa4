"""The local demo end to end: broker, SQLite, an order service, one worker, a verdict.

The order service writes each order change and its event in one transaction (the
outbox); the worker's relay ships the outbox to the topic and its consumers apply
the events. A legacy producer also sends some events a second time, straight to
the topic, so that the consumers meet duplicates as well.

Everything it starts it also stops, whatever happens, and it never waits
longer than ``DemoOptions.timeout`` in total. Expected failures (the broker or
worker would not start, the worker died, time ran out) end in a clear message
and exit code 1, not a traceback. After a failure or a mismatch the temp
directory (database, broker and worker logs) is kept for inspection.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from aiokafka.errors import KafkaError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.exc import SQLAlchemyError

from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.demo.broker import LocalBroker
from app.demo.envelopes import Message, decode
from app.demo.expected import CONSUMERS
from app.demo.order_service import create_orders_table, write_orders
from app.demo.outbox_figures import OutboxFigures, until_shipped
from app.demo.produce import ensure_topic, produce
from app.demo.progress import DbState, wait_until_complete
from app.demo.report import print_outbox, print_summary, print_tables, print_verdict
from app.demo.verdict import compare
from app.demo.worker import WorkerDiedError, WorkerProcess
from app.demo.workload import Workload, generate

BROKER_START_SECONDS = 20.0


@dataclass(frozen=True)
class DemoOptions:
    """The knobs of ``python -m app demo`` (see its ``--help``)."""

    orders: int = 2_000
    users: int = 200
    skus: int = 30
    seed: int = 7
    duplicate_ratio: float = 0.10
    swap_ratio: float = 0.05
    cancel_ratio: float = 0.20
    partitions: int = 8
    topic: str = "order-event-topic"
    timeout: float = 180.0
    keep: bool = False


class DemoError(Exception):
    """An expected failure of the demo: its message is all the user needs to read."""


@dataclass(frozen=True)
class _Timings:
    produce_seconds: float
    total_seconds: float
    outbox: OutboxFigures


def run_demo(options: DemoOptions, console: Console) -> int:
    """Run the demo and print its outcome; return the process exit code (0, 1 or 130)."""
    deadline = time.monotonic() + options.timeout
    workdir = Path(tempfile.mkdtemp(prefix="effectively-once-demo-"))
    broker = LocalBroker(log_path=workdir / "broker.log")
    worker: WorkerProcess | None = None
    keep = options.keep
    try:
        workload = generate(
            orders=options.orders,
            users=options.users,
            skus=options.skus,
            seed=options.seed,
            duplicate_ratio=options.duplicate_ratio,
            swap_ratio=options.swap_ratio,
            cancel_ratio=options.cancel_ratio,
        )
        console.print(f"[dim]working directory {workdir}[/]")
        with console.status("starting a local broker (Tansu, in memory)"):
            _start_broker(broker, deadline)
        database_url = f"sqlite+aiosqlite:///{workdir / 'demo.db'}"
        worker = WorkerProcess(
            env=_worker_env(broker.url, database_url, options),
            cwd=workdir,
            log_path=workdir / "worker.log",
        )
        state, timings = asyncio.run(
            _produce_and_wait(workload, broker, worker, database_url, options, deadline, console)
        )
        verdict = compare(workload.expected, state)
        keep = keep or not verdict.ok
    except DemoError as exc:
        keep = True
        console.print(f"[bold red]✘ demo failed:[/] {escape(str(exc))}")
        if worker is not None and (tail := worker.log_tail()):
            console.rule("last lines of the worker log")
            console.print(tail, markup=False, highlight=False)
        console.print(f"[dim]logs kept in {workdir}[/]")
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130
    finally:
        with console.status("stopping the worker and the broker"):
            if worker is not None:
                worker.stop()
            broker.stop()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)

    print_summary(console, workload, timings.produce_seconds, timings.total_seconds)
    print_outbox(console, timings.outbox)
    print_tables(console, workload.expected, state)
    print_verdict(console, verdict, workload.expected)
    if keep:
        console.print(f"[dim]database and logs kept in {workdir}[/]")
    return 0 if verdict.ok else 1


def _start_broker(broker: LocalBroker, deadline: float) -> None:
    try:
        broker.start(timeout=min(BROKER_START_SECONDS, _remaining(deadline)))
    except (RuntimeError, OSError) as exc:
        raise DemoError(f"the local broker did not start: {exc}") from None


def _worker_env(broker_url: str, database_url: str, options: DemoOptions) -> dict[str, str]:
    return {
        "BROKER_URL": broker_url,
        "DATABASE_URL": database_url,
        "ORDER_TOPIC": options.topic,
        "ORDER_TOPIC_PARTITIONS": str(options.partitions),
        "APP_ID": "order-consumers",
        "HANDLER_MODULES": "handlers",
        "BROKER_SESSION_TIMEOUT_SECONDS": "10",
        "MIGRATE_ON_START": "true",
        # The local broker (Tansu 0.6) refuses idempotent producers; a Kafka broker takes them.
        "RELAY_IDEMPOTENT": "false",
    }


async def _produce_and_wait(
    workload: Workload,
    broker: LocalBroker,
    worker: WorkerProcess,
    database_url: str,
    options: DemoOptions,
    deadline: float,
    console: Console,
) -> tuple[DbState, _Timings]:
    """Create the topic, start the worker, send the batch and wait for every consumer."""
    watch = _Watch()
    try:
        async with asyncio.timeout(_remaining(deadline)):
            await ensure_topic(broker.bootstrap, options.topic, options.partitions)
            await upgrade_to_head(database_url)  # the order service writes to the outbox
            worker.start()
            watch.stage = "waiting for the worker's relay"
            await _relay_polling(worker)
            watch.stage = "the order service writing orders"
            started = time.monotonic()
            envelopes = [decode(message) for message in workload.messages]
            engine = create_engine(database_url, pool_size=1)
            try:
                await create_orders_table(engine)
                written = await write_orders(engine, options.topic, envelopes)
            finally:
                await engine.dispose()
            produced = time.monotonic() - started
            console.print(
                f"the order service wrote {written:,} order changes with their events "
                f"(orders + outbox_event, one transaction each batch) in {produced:.2f} s"
            )
            watch.stage = "sending the duplicates"
            again = _repeats(workload.messages)
            await produce(broker.bootstrap, options.topic, again)
            console.print(
                f"a legacy producer sent {len(again):,} of them again, straight to the topic"
            )
            watch.stage = "waiting for the consumers"
            state = await _wait_with_progress(workload, worker, database_url, watch, console)
            outbox = await until_shipped(database_url, _remaining(deadline))
            return state, _Timings(produced, time.monotonic() - started, outbox)
    except WorkerDiedError as exc:
        raise DemoError(str(exc)) from None
    except KafkaError as exc:
        raise DemoError(f"the broker failed while {watch.stage}: {exc!r}") from None
    except SQLAlchemyError as exc:
        raise DemoError(f"reading the database failed: {exc}") from None
    except TimeoutError:
        raise DemoError(
            f"not done within the {options.timeout:.0f} s timeout, still {watch.describe()}"
        ) from None


@dataclass
class _Watch:
    """Where the demo is, for a useful message if time runs out."""

    stage: str = "creating the topic"
    last: DbState | None = None

    def describe(self) -> str:
        if self.last is None:
            return self.stage
        counts = ", ".join(f"{c} {self.last.consumed_by(c):,}" for c in CONSUMERS)
        return f"{self.stage} (consumed so far: {counts})"


async def _wait_with_progress(
    workload: Workload,
    worker: WorkerProcess,
    database_url: str,
    watch: _Watch,
    console: Console,
) -> DbState:
    total = workload.distinct_events * len(CONSUMERS)
    columns = (
        TextColumn("consumed events"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("consume", total=total)

        def show(state: DbState) -> None:
            watch.last = state
            done = sum(min(state.consumed_by(c), workload.distinct_events) for c in CONSUMERS)
            progress.update(task, completed=done)

        # The enclosing asyncio.timeout bounds this wait; no second deadline here.
        return await wait_until_complete(
            database_url,
            workload.expected,
            math.inf,
            on_poll=show,
            check_alive=worker.check_alive,
        )


async def _relay_polling(worker: WorkerProcess) -> None:
    """Until the worker's relay has polled the outbox once (read from its /metrics)."""
    url = f"http://127.0.0.1:{worker.web_port}/metrics"
    while True:
        worker.check_alive()
        try:
            page = await asyncio.to_thread(_fetch, url)
        except OSError:
            page = ""
        for line in page.splitlines():
            if line.startswith("effectively_once_relay_last_poll_timestamp_seconds "):
                if float(line.split()[1]) > 0:
                    return
        await asyncio.sleep(0.2)


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=2) as response:
        return str(response.read().decode())


def _repeats(messages: list[Message]) -> list[Message]:
    """The messages whose eventId came before: the workload's duplicate sends."""
    seen: set[str] = set()
    repeats = []
    for message in messages:
        event_id = decode(message)["eventId"]
        if event_id in seen:
            repeats.append(message)
        seen.add(event_id)
    return repeats


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise DemoError("the overall timeout expired")
    return left
