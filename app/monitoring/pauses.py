"""Infrastructure pauses: which dependency failed, and whether the worker is paused now.

The pipeline pauses and retries in place when the database, Redis or the broker
is unreachable (``app.pipeline.pause``). ``on_pause`` is its callback: it counts
the pause and marks the batch it happened in (found through a context variable,
which the processor's per-consumer tasks inherit). The worker is paused while a
batch in flight has paused, while start-up work (migrations) has paused and not
yet succeeded, while a long-lived task of its own (the relay: ``Outside``) has
paused and not yet made progress since, or while the watch of a dependency finds it
not answering (``unreachable``, ``app.monitoring.watch``). A batch that ends, however
it ends, is no longer paused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from app import metrics


@dataclass(eq=False)
class _Batch:
    paused: bool = False


_current: ContextVar[_Batch | None] = ContextVar("effectively_once_batch", default=None)
_in_flight: set[_Batch] = set()
_outside_batches = [False]  # start-up work paused (a list: module state without ``global``)
_tasks_paused: set[str] = set()  # the names of ``Outside`` tasks paused now


@contextmanager
def batch_scope() -> Iterator[None]:
    """Run a batch; pauses inside it mark it paused until it ends."""
    batch = _Batch()
    token = _current.set(batch)
    _in_flight.add(batch)
    try:
        yield
    finally:
        _in_flight.discard(batch)
        _current.reset(token)
        _publish()


def on_pause(what: str, exc: BaseException, delay: float) -> None:
    """``OnPause`` callback: ``what`` failed on ``exc``; retried in ``delay`` seconds."""
    metrics.record_pause(dependency_of(exc), delay)
    batch = _current.get()
    if batch is None:
        _outside_batches[0] = True
    else:
        batch.paused = True
    _publish()


def resumed() -> None:
    """Start-up work that paused (outside any batch) succeeded."""
    _outside_batches[0] = False
    _publish()


class Outside:
    """A long-lived task outside any batch (the relay): paused from its pause until it
    reports progress (``resumed``), whatever batches do meanwhile."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_pause(self, what: str, exc: BaseException, delay: float) -> None:
        """``OnPause`` callback of the task."""
        metrics.record_pause(dependency_of(exc), delay)
        _tasks_paused.add(self.name)
        _publish()

    def resumed(self) -> None:
        """The task got work done again (the relay: a cycle ended)."""
        if self.name in _tasks_paused:
            _tasks_paused.discard(self.name)
            _publish()


def unreachable(dependency: str) -> None:
    """A watch found ``dependency`` not answering: the worker is paused on it until
    ``answers``, whether or not a batch met the outage yet."""
    _tasks_paused.add(_WATCHED + dependency)
    _publish()


def answers(dependency: str) -> None:
    """The watch found ``dependency`` answering again."""
    _tasks_paused.discard(_WATCHED + dependency)
    _publish()


_WATCHED = "watched:"


def _publish() -> None:
    metrics.set_paused(
        _outside_batches[0] or bool(_tasks_paused) or any(batch.paused for batch in _in_flight)
    )


def dependency_of(exc: BaseException) -> str:
    """Which dependency an infrastructure failure came from.

    Follows the cause chain; for each exception, its type's module decides, else
    the innermost traceback frame that belongs to a known client library (a bare
    ``ConnectionRefusedError`` raised inside asyncpg is the database's).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _library(type(current).__module__) or _library_in_traceback(current)
        if found:
            return found
        current = current.__cause__ or current.__context__
    return "other"


_LIBRARIES = (
    ("redis", ("redis",)),
    ("broker", ("aiokafka", "kafka", "faust")),
    ("database", ("sqlalchemy", "asyncpg", "aiomysql", "pymysql", "aiosqlite", "sqlite3")),
)


def _library(module: str) -> str | None:
    for dependency, prefixes in _LIBRARIES:
        if module.split(".", 1)[0] in prefixes:
            return dependency
    return None


def _library_in_traceback(exc: BaseException) -> str | None:
    modules = []
    tb = exc.__traceback__
    while tb is not None:
        modules.append(str(tb.tb_frame.f_globals.get("__name__", "")))
        tb = tb.tb_next
    for module in reversed(modules):  # innermost first
        found = _library(module)
        if found:
            return found
    return None
