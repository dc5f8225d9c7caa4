"""Publish retry and dead-letter records with the worker's own faust producer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from dlq.records import OutRecord


class FaustPublisher:
    """Sends through ``app.producer`` and waits for every acknowledgement."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def publish(self, records: Sequence[OutRecord]) -> None:
        """Send all ``records`` concurrently; raises if any send fails."""
        if not records:
            return
        producer = self._app.producer
        await asyncio.gather(
            *(
                producer.send_and_wait(
                    r.topic, r.key, r.value, partition=None, timestamp=None, headers=list(r.headers)
                )
                for r in records
            )
        )
