"""What a handler sees besides its event: the transaction's session, and what it may add to it."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.outbox.event import NewEvent

AfterCommit = Callable[[], Awaitable[None] | None]
"""An ``async def`` function of no arguments, or a plain one."""


@dataclass(slots=True)
class HandlerContext:
    """Handed to every handler call.

    ``session`` belongs to the framework's transaction: handlers never commit
    or roll back. Events the handler produces go through ``emit``: they are
    written to the outbox in the same transaction, so they are published if and
    only if the handler's effects committed, once. Work that must not happen
    unless the transaction commits (sending an e-mail, calling another service)
    goes through ``after_commit``.
    """

    session: AsyncSession
    consumer: str
    _after_commit: list[AfterCommit] = field(default_factory=list)
    _emitted: list[dict[str, Any]] = field(default_factory=list)

    def after_commit(self, callback: AfterCommit) -> None:
        """Run ``callback`` once the batch's transaction has committed (never if it rolls back):
        an ``async def`` function of no arguments is awaited, for at most 30 s (the batch's
        offsets wait for it), a plain one called; at most once either way. Anything else (a
        coroutine, ``ctx.after_commit(notify())``: the call already made) raises ``TypeError``
        here, in the handler, rather than failing after the commit where only a log says so."""
        if inspect.iscoroutine(callback) or not callable(callback):
            if inspect.iscoroutine(callback):
                callback.close()  # never awaited, and Python would warn so
                hint = "; pass the function, not its call: ctx.after_commit(notify)"
            else:
                hint = ""
            raise TypeError(
                f"ctx.after_commit takes a function of no arguments, got "
                f"{type(callback).__name__}{hint}"
            )
        self._after_commit.append(callback)

    def emit(self, *events: NewEvent) -> list[str]:
        """Add ``events`` to the outbox in this transaction; returns their eventIds.

        Raises ``InvalidOutboxEvent`` (a handler failure) for an event no row can hold.
        """
        now = datetime.now(UTC)
        rows = [event.row(now) for event in events]
        self._emitted.extend(rows)
        return [row["event_id"] for row in rows]
