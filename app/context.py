"""What a handler sees besides its event: the transaction's session, nothing more."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

AfterCommit = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class HandlerContext:
    """Handed to every handler call.

    ``session`` belongs to the framework's transaction: handlers never commit
    or roll back. Work that must not happen unless the transaction commits
    (sending an e-mail, calling another service) goes through ``after_commit``.
    """

    session: AsyncSession
    consumer: str
    _after_commit: list[AfterCommit] = field(default_factory=list)

    def after_commit(self, callback: AfterCommit) -> None:
        """Run ``callback`` once the batch's transaction has committed (never if it rolls back)."""
        self._after_commit.append(callback)
