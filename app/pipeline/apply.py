"""Apply stage: run a consumer's handlers for one event inside the batch's transaction."""

from __future__ import annotations

from enum import StrEnum

from app.context import HandlerContext
from app.errors import InfrastructureError, PermanentError
from app.pipeline.classify import is_infrastructure
from app.pipeline.decode import Decoded
from app.registry import HandlerSpec


class Mode(StrEnum):
    """How a batch attempt isolates its events.

    ``FAST``: no savepoints; any handler failure aborts the attempt, which is
    then run again in ``ISOLATED`` mode. ``ISOLATED``: each event runs in a
    savepoint, so one failing event rolls back only its own effects.
    """

    FAST = "fast"
    ISOLATED = "isolated"


class HandlerFailed(Exception):
    """A handler raised: carries the cause and the reason the failure path records."""

    def __init__(self, spec: HandlerSpec, cause: BaseException) -> None:
        super().__init__(f"{spec.name}: {type(cause).__name__}: {cause}")
        self.spec = spec
        self.cause = cause

    @property
    def reason(self) -> str:
        """``non-retryable`` when the handler declared so, else ``retryable``."""
        if isinstance(self.cause, (PermanentError, *self.spec.non_retryable)):
            return PermanentError.reason
        return "retryable"


async def run_handlers(handlers: list[HandlerSpec], item: Decoded, ctx: HandlerContext) -> None:
    """Run ``handlers`` on ``item`` in order.

    Raises ``InfrastructureError`` when a dependency failed (the batch pauses)
    and ``HandlerFailed`` when the event's handler failed.
    """
    for spec in handlers:
        try:
            await spec.fn(item.event, ctx)
        except Exception as exc:
            if is_infrastructure(exc):
                raise InfrastructureError(f"{spec.name}: {exc}") from exc
            raise HandlerFailed(spec, exc) from exc


async def apply_isolated(handlers: list[HandlerSpec], item: Decoded, ctx: HandlerContext) -> None:
    """Like ``run_handlers``, inside a savepoint that is rolled back if a handler fails."""
    mark = len(ctx._after_commit)
    savepoint = await ctx.session.begin_nested()
    try:
        await run_handlers(handlers, item, ctx)
    except HandlerFailed:
        await savepoint.rollback()
        del ctx._after_commit[mark:]
        raise
    except BaseException:
        raise
    else:
        await savepoint.commit()
