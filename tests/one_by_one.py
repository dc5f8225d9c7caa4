"""A fake broker's ``send_many`` (the relay's ``Broker``) made of its one-record ``send``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from app.outbox.message import Message


async def one_by_one(
    send: Callable[[Message], Awaitable[asyncio.Future[Any]]], messages: Sequence[Message]
) -> list[asyncio.Future[Any] | Exception]:
    """Each of ``messages`` through ``send`` in turn: its future, or the error it raised."""
    outcomes: list[asyncio.Future[Any] | Exception] = []
    for message in messages:
        try:
            outcomes.append(await send(message))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes
