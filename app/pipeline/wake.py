"""A dependency that answers again cuts short the pauses that wait for it.

A batch paused on an outage sleeps its back-off (up to ``INFRA_RETRY_MAX_SECONDS``)
before it tries again, each consumer's on its own; the worker's watch
(``app.monitoring.watch``) asks the database and the broker every few seconds. When the
watch finds one answering again (``answered``), every pause under way ends at its next
look (``app.pipeline.pause.sleep_while_held``) and its batch tries again at once, rather
than up to the back-off later. A batch that meets the failure again pauses again, its
next back-off the longer one.
"""

from __future__ import annotations

_answers = [0]  # how many times a watched dependency answered again (module state)


def answered() -> None:
    """A watched dependency answers again after it did not."""
    _answers[0] += 1


def mark() -> int:
    """Where the answers stand now: ``since(mark())`` is false until the next one."""
    return _answers[0]


def since(mark: int) -> bool:
    """Whether a dependency answered again after ``mark``."""
    return _answers[0] != mark
