"""The engine ``/ready``'s database check runs on: one connection of its own, made at the
first check, so that a busy pool (the pipeline's, the relay's) cannot fail ``/ready``."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine, dispose
from app.db.timeouts import DbTimeouts


class CheckEngine:
    """A one-connection engine on ``url``, made when first asked for."""

    def __init__(self, url: str, timeouts: DbTimeouts) -> None:
        self._url = url
        self._timeouts = timeouts
        self._engine: AsyncEngine | None = None

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            self._engine = create_engine(self._url, pool_size=1, timeouts=self._timeouts)
        return self._engine

    async def dispose(self) -> None:
        if self._engine is not None:
            await dispose(self._engine)
