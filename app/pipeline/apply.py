"""Apply stage: run a consumer's handlers for one event inside the batch's transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum

from sqlalchemy.ext.asyncio import AsyncSession

from app.context import HandlerContext
from app.errors import (
    EventIdReused,
    HandlerExited,
    HandlerTimedOut,
    InfrastructureError,
    InvalidOutboxEvent,
    PermanentError,
)
from app.pipeline.classify import Fault, fault_of, is_data_error, through_a_dependency
from app.pipeline.decode import Decoded
from app.registry import HandlerSpec


class Mode(StrEnum):
    """How a batch attempt isolates its events.

    ``FAST``: the gate plans the whole batch first, assuming every handler
    succeeds; the handlers then run wave by wave without savepoints (batch
    handlers get many events per call). Any handler failure aborts the attempt,
    which is then run again in ``ISOLATED`` mode. ``ISOLATED``: each event runs in a
    savepoint, so one failing event rolls back only its own effects.
    ``ESCALATED``: as ``ISOLATED``, and a statement the database cancels in a
    handler (its statement timeout, say) fails that event instead of pausing the
    batch, and each event's dedup or parking record is written in the event's own
    savepoint, so that a record the database refuses fails that event instead of
    the batch: the processor runs a batch so after the same cancellation kept
    pausing it, or the same batch kept meeting a duplicate key.
    """

    FAST = "fast"
    ISOLATED = "isolated"
    ESCALATED = "escalated"


class EventFailed(Exception):
    """One event of the batch failed: it is routed (retry tier or DLT) with ``cause`` and
    ``reason``, and only its own effects are rolled back. Its own message says what
    failed, never the cause's text: that travels only as ``FAILURE_DETAIL`` allows."""

    def __init__(self, what: str, cause: BaseException) -> None:
        super().__init__(what)
        self.cause = cause

    @property
    def reason(self) -> str:
        """``retryable`` (a later attempt may succeed)."""
        return "retryable"


class HandlerFailed(EventFailed):
    """A handler raised: carries the cause and the reason the failure path records."""

    def __init__(
        self, spec: HandlerSpec, cause: BaseException, event_id: str | None = None
    ) -> None:
        super().__init__(spec.name, cause)
        self.spec = spec
        self.event_id = event_id  # the event it failed on, when one call had one event

    @property
    def reason(self) -> str:
        """``non-retryable`` when the handler declared so, emitted an event no outbox row can
        hold, or wrote a value its column can never hold (too long, not a number or a date,
        none where one is required): no retry changes those; else ``retryable``."""
        if isinstance(self.cause, (PermanentError, InvalidOutboxEvent, *self.spec.non_retryable)):
            return PermanentError.reason
        if is_data_error(self.cause):
            return PermanentError.reason
        return "retryable"


class ReusedEventId(EventFailed):
    """The event's eventId is another event's (``EventIdReused``): it goes to the DLT."""

    def __init__(self, event_id: str, recorded: str, this: str) -> None:
        super().__init__(
            "eventId reused",
            EventIdReused(
                f"eventId {event_id} is {recorded}'s, which this consumer applied or parked; "
                f"this event is {this}: a producer reused the id. Not applied (its id "
                "cannot take effect twice): send it again under an eventId of its own, "
                "or give its version up (python -m dlq skip or release)"
            ),
        )

    @property
    def reason(self) -> str:
        """``non-retryable``: no attempt changes whose the id is."""
        return PermanentError.reason


class RecordRefused(EventFailed):
    """The database refused the event's dedup (or parking) record as a duplicate key,
    although the lookup before had found no such record: the database holds an id it
    takes for this one (a collation coarser than Python's equality), or another worker
    recorded the event meanwhile. A later attempt finds which."""

    def __init__(self, table: str, cause: BaseException) -> None:
        super().__init__(f"{table} record refused as a duplicate key", cause)


async def run_handlers(
    handlers: list[HandlerSpec],
    items: Sequence[Decoded],
    ctx: HandlerContext,
    blame_statements: bool = False,
    limit: float | None = None,
) -> None:
    """Run ``handlers`` on ``items`` (events of one type, distinct aggregates), in order.

    A batch handler gets the whole list in one call, any other one event per call.
    ORM changes a call left are flushed right after it, inside its boundary.
    Raises ``InfrastructureError`` when a dependency failed (the batch pauses)
    and ``HandlerFailed`` when a handler failed; with ``blame_statements``, a
    statement the database cancelled counts as the handler's failure. An ``OSError`` or
    ``TimeoutError`` of the handler's own (not raised through the database: see
    ``through_a_dependency``) is the handler's failure.

    ``limit``: the seconds a handler's calls for ``items`` may take (one timer for them
    all: a timer per call would cost a few microseconds an event); past it they are
    cancelled and fail as ``HandlerTimedOut``, naming the event when ``items`` is one.
    A handler that raises ``SystemExit`` or ``KeyboardInterrupt`` fails its event as
    ``HandlerExited``: it does not stop the worker.
    """
    session = ctx.session
    for spec in handlers:
        current: Decoded | None = items[0] if len(items) == 1 else None
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                if spec.batch:
                    await spec.fn([item.event for item in items], ctx)
                    if _pending(session):
                        await session.flush()
                else:
                    for item in items:
                        current = item
                        await spec.fn(item.event, ctx)
                        if _pending(session):
                            await session.flush()
        except (SystemExit, KeyboardInterrupt) as exc:
            exited = HandlerExited(f"the handler raised {exc!r}: a handler may not stop the worker")
            raise HandlerFailed(spec, exited, _id(current)) from exc
        except TimeoutError as exc:
            if not deadline.expired():
                raise _classified(spec, exc, current, blame_statements) from exc
            timed_out = HandlerTimedOut(
                f"ran past HANDLER_TIMEOUT_SECONDS ({limit:g}s"
                + (f" for {len(items)} events" if len(items) > 1 else "")
                + "): cancelled"
            )
            raise HandlerFailed(spec, timed_out, _id(current) if len(items) == 1 else None) from exc
        except Exception as exc:
            raise _classified(spec, exc, current, blame_statements) from exc


def _id(item: Decoded | None) -> str | None:
    return item.event_id if item is not None else None


def _classified(
    spec: HandlerSpec, exc: Exception, current: Decoded | None, blame_statements: bool
) -> Exception:
    """What a handler's ``exc`` is: its event's failure, or an infrastructure failure."""
    fault = fault_of(exc)
    event_id = _id(current)
    if fault is Fault.EVENT or (blame_statements and fault is Fault.STATEMENT):
        return HandlerFailed(spec, exc, event_id)
    if isinstance(exc, OSError | TimeoutError) and not through_a_dependency(exc):
        return HandlerFailed(spec, exc, event_id)  # the handler's own I/O
    return InfrastructureError(f"{spec.name}: {exc}")


def _pending(session: AsyncSession) -> bool:
    """Whether a handler left ORM changes unflushed (``session.add`` and the like). They are
    flushed inside the handler's boundary, so that a row the database refuses fails the
    handler call, not the framework's next statement or the commit. Handlers that write
    with Core statements (the example consumers) leave none, and pay three set checks."""
    return bool(session.new or session.dirty or session.deleted)


async def apply_waves(
    plan: Sequence[Decoded],
    handlers_for: Callable[[str], list[HandlerSpec]],
    ctx: HandlerContext,
    limit: float | None = None,
) -> None:
    """Run the handlers of ``plan`` (application order) wave by wave.

    Wave ``k`` holds every aggregate's ``k``-th event of the plan, so no aggregate
    appears twice in a wave and a batch of N aggregates with up to three events
    each needs three waves, not N. Within a wave, events are grouped by type so a
    batch handler is called once per type. Per-aggregate order holds because an
    aggregate's next event is always in a later wave; order across aggregates was
    never promised. ``limit``: see ``run_handlers`` (a handler's calls for a wave's events
    of one type share it).
    """
    for wave in waves(plan):
        by_type: dict[str, list[Decoded]] = {}
        for item in wave:
            by_type.setdefault(item.event.event_type, []).append(item)
        for event_type, items in by_type.items():
            handlers = handlers_for(event_type)
            if handlers:
                await run_handlers(handlers, items, ctx, limit=limit)


def waves(plan: Sequence[Decoded]) -> list[list[Decoded]]:
    """Layer ``plan``: wave ``k`` gets each aggregate's ``k``-th event, in plan order."""
    result: list[list[Decoded]] = []
    depth: dict[tuple[str, str], int] = {}
    for item in plan:
        key = item.event.aggregate
        level = depth.get(key, 0)
        depth[key] = level + 1
        if level == len(result):
            result.append([])
        result[level].append(item)
    return result


async def apply_isolated(
    handlers: list[HandlerSpec],
    item: Decoded,
    ctx: HandlerContext,
    mode: Mode = Mode.ISOLATED,
    claim: Callable[[], Awaitable[None]] | None = None,
    limit: float | None = None,
) -> None:
    """Like ``run_handlers``, inside a savepoint that is rolled back if a handler fails;
    ``claim`` (the event's dedup record, ``ESCALATED`` mode) runs last in the same savepoint,
    and may fail the event too (``RecordRefused``)."""
    mark, emitted = len(ctx._after_commit), len(ctx._emitted)
    savepoint = await ctx.session.begin_nested()
    try:
        await run_handlers(
            handlers, [item], ctx, blame_statements=mode is Mode.ESCALATED, limit=limit
        )
        if claim is not None:
            await claim()
    except EventFailed:
        await savepoint.rollback()
        del ctx._after_commit[mark:]
        del ctx._emitted[emitted:]  # its events go with its effects
        raise
    except BaseException:
        raise
    else:
        await savepoint.commit()
