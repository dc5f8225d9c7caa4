"""Run a committed batch's after-commit callbacks (``ctx.after_commit``), and say which
failed.

The transaction is committed by then: a callback that fails or overruns is logged and
left, the callbacks after it still run, and nothing is retried (after-commit effects are
at most once). ``report`` hears of each such failure as a value, so that a test (the kit's
``Harness.after_commit_failures``) can assert on what a worker only logs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass

from app.context import HandlerContext
from app.failure_detail import FailureDetailPolicy
from app.failure_log import log_failure

log = logging.getLogger("effectively_once.pipeline")


@dataclass(frozen=True)
class AfterCommitFailure:
    """An after-commit callback that raised, or ran past its limit (``error`` a
    ``TimeoutError`` then), after ``consumer``'s transaction committed."""

    consumer: str
    callback: str  # its qualified name
    error: BaseException


Report = Callable[[AfterCommitFailure], None]


async def run_after_commit(
    ctx: HandlerContext, detail: FailureDetailPolicy, limit: float, report: Report | None = None
) -> None:
    """Run the batch's after-commit callbacks in order: an ``async`` one awaited for at most
    ``limit`` seconds, a plain one called. One that fails or overruns is logged, given to
    ``report`` and left (one that raises ``SystemExit`` or ``KeyboardInterrupt`` too: it may
    not stop the worker); the transaction stays committed and the callbacks after it run."""
    for callback in ctx._after_commit:
        window = asyncio.timeout(limit)
        try:
            result = callback()
            if inspect.isawaitable(result):
                async with window:
                    await result
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            name = _name(callback)
            if report is not None:
                _report(report, AfterCommitFailure(ctx.consumer, name, exc))
            if isinstance(exc, TimeoutError) and window.expired():
                log.error(
                    "%s: after-commit callback %s did not finish within %gs and was "
                    "abandoned; the transaction stays committed (give its outside call a "
                    "timeout of its own)",
                    ctx.consumer,
                    name,
                    limit,
                )
                continue
            text = detail.describe(exc)
            log_failure(
                log,
                logging.ERROR,
                text,
                "%s: after-commit callback failed (%s); the transaction stays committed",
                ctx.consumer,
                text.line,
            )


def _report(report: Report, failure: AfterCommitFailure) -> None:
    """Hand ``failure`` to ``report``; a report that fails is logged, not raised: the
    batch is committed, and its other callbacks still run."""
    try:
        report(failure)
    except Exception:
        log.exception("%s: reporting a failed after-commit callback failed", failure.consumer)


def _name(callback: Callable[[], object]) -> str:
    return getattr(callback, "__qualname__", None) or repr(callback)
