"""The system's producer side: how the soak's records reach the order topic.

A ``Source`` is a pluggable piece, so that the way events are produced can change
without touching the rest of the soak. ``DirectProducer`` is a foreign service
producing straight to Kafka; ``chaos.outbox_source.OutboxSource`` an order service
writing its outbox, with two relays the schedule SIGKILLs (its ``processes``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from collections.abc import Sequence
from typing import Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from chaos.workers import WorkerPool
from chaos.workload import Record

TICK_SECONDS = 0.02
RESEND_PAUSE_SECONDS = 0.5
log = logging.getLogger("chaos.source")


class Source(Protocol):
    """Puts records on the topic at a pace, and says how far each partition got."""

    label: str

    @property
    def resends(self) -> int:
        """Records sent again after a failed or unanswered send (may duplicate)."""
        ...

    @property
    def processes(self) -> WorkerPool | None:
        """Processes of the producer side the soak may SIGKILL (relays); None: none."""
        ...

    async def start(self) -> None:
        """Connect (and start any processes)."""
        ...

    async def feed(self, records: Sequence[Record], rate: float) -> None:
        """Send ``records`` in order at ``rate`` per second; return once all are acknowledged."""
        ...

    def ends(self) -> dict[int, int]:
        """partition -> the offset after the last record acknowledged there."""
        ...

    async def stop(self) -> None:
        """Disconnect and stop what ``start`` started."""
        ...


class DirectProducer:
    """One producer that sends straight to the topic, as a foreign service would.

    Records go out in order; the broker's acknowledgements come back in bulk. A send
    that fails (the broker connection was cut) is sent again, after the ones already
    on their way: as with any producer that retries without idempotence, it may land
    twice or behind a later version of its aggregate. The consumers must absorb both.
    """

    label = "one producer, straight to Kafka"

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.resends = 0
        self._ends: dict[int, int] = {}
        self._retry: list[Record] = []
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            linger_ms=5,
            request_timeout_ms=10_000,
            retry_backoff_ms=200,
        )

    @property
    def processes(self) -> WorkerPool | None:
        """None: this producer is the soak's own coroutine."""
        return None

    async def start(self) -> None:
        """Connect to the broker."""
        await self._producer.start()

    async def feed(
        self, records: Sequence[Record], rate: float, places: Sequence[int] | None = None
    ) -> None:
        """Send ``records`` at ``rate`` per second, then wait until each one is acknowledged;
        ``places``: each record's place in a longer send order that ``rate`` paces (ascending;
        None: the records are the whole order)."""
        started = time.monotonic()
        inflight: set[asyncio.Future[object]] = set()
        sent = 0
        while sent < len(records) or inflight or self._retry:
            due = int((time.monotonic() - started) * rate) + 1
            due = min(len(records), due if places is None else bisect_left(places, due))
            while self._retry:
                inflight.add(await self._send(self._retry.pop(0)))
            while sent < due:
                inflight.add(await self._send(records[sent]))
                sent += 1
            inflight = {future for future in inflight if not future.done()}
            if sent == len(records) and inflight:
                await asyncio.wait(inflight, timeout=TICK_SECONDS)
            else:
                await asyncio.sleep(TICK_SECONDS)

    def ends(self) -> dict[int, int]:
        """partition -> the offset after the last record acknowledged there."""
        return dict(self._ends)

    async def stop(self) -> None:
        """Flush and disconnect."""
        await self._producer.stop()

    async def _send(self, record: Record) -> asyncio.Future[object]:
        """Hand ``record`` to the producer (retrying until it takes it); its delivery future."""
        while True:
            try:
                future: asyncio.Future[object] = await self._producer.send(
                    self.topic, record.value, key=record.key, headers=list(record.headers)
                )
            except KafkaError as exc:  # no metadata while the broker is cut off
                log.info("send refused (%r); trying again", exc)
                await asyncio.sleep(RESEND_PAUSE_SECONDS)
                continue
            future.add_done_callback(lambda done: self._delivered(record, done))
            return future

    def _delivered(self, record: Record, done: asyncio.Future[object]) -> None:
        if done.cancelled() or done.exception() is not None:
            self.resends += 1
            self._retry.append(record)
            return
        meta = done.result()
        partition, offset = meta.partition, meta.offset  # type: ignore[attr-defined]
        self._ends[partition] = max(self._ends.get(partition, 0), offset + 1)
