"""An order service's outbox as the soak's producer side: rows written by plain SQL, two relays.

``OutboxSource`` writes each record into ``outbox_event`` of the order service's own
database as a service in another language would (one ``INSERT`` per tick of the pace,
in its own transaction; the columns a relay reads, nothing of the framework's code), and
runs two ``python -m app relay`` processes that ship them (through the database proxy, so
that the database faults strike them as they strike the workers). The schedule SIGKILLs
a relay every ``relay_kill_every`` seconds; it is restarted like a worker.

What an outbox row cannot carry goes straight to the topic (``DirectProducer``), as a
legacy producer beside the service sends it: a value that is not JSON (a relay would
mark its row ``DEAD``, rightly) and a second send of an event (the outbox's ``event_id``
is unique). A write the database did not confirm (a crash, a cut connection) is written
again without the rows that did land.

``feed`` returns once every row is published or dead; ``ends`` are the topic's end offsets
then (and the direct sends' until then).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError
from sqlalchemy import bindparam, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from chaos.brokers import end_offsets
from chaos.source import RESEND_PAUSE_SECONDS, TICK_SECONDS, DirectProducer
from chaos.workers import WorkerPool
from chaos.workload import AGGREGATE_TYPE, Record

RELAYS = 2
POLL_SECONDS = 0.5
LOOKUP_SECONDS = 10.0
log = logging.getLogger("chaos.outbox_source")

_INSERT = text(
    "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, topic, "
    "payload, aggregate_version) VALUES (:event_id, :aggregate_type, :aggregate_id, "
    ":event_type, :topic, :payload, :aggregate_version)"
)
_LANDED = text("SELECT event_id FROM outbox_event WHERE event_id IN :ids").bindparams(
    bindparam("ids", expanding=True)
)
_UNSETTLED = text("SELECT count(*) FROM outbox_event WHERE status IN ('PENDING', 'PROCESSING')")


class OutboxSource:
    """An order service writing its events into its outbox; two relays ship them."""

    label = "an order service's outbox (plain SQL), two relays SIGKILLed on schedule"

    def __init__(
        self,
        database_url: str,
        relay_env: Mapping[str, str],
        workdir: Path,
        bootstrap: str,
        topic: str,
        partitions: int,
    ) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.rewrites = 0  # writes the database did not confirm, written again
        self._url = database_url
        self._engine: AsyncEngine | None = None
        self._direct = DirectProducer(bootstrap, topic)
        self._relays = WorkerPool(
            RELAYS, relay_env, workdir, program=[sys.executable, "-m", "app", "relay"], prefix="r"
        )
        self._supervising: asyncio.Task[None] | None = None
        self._ends: dict[int, int] = {}

    @property
    def resends(self) -> int:
        """Records sent or written again after a send or a write that was not confirmed."""
        return self._direct.resends + self.rewrites

    @property
    def processes(self) -> WorkerPool:
        """The relays, which the soak SIGKILLs."""
        return self._relays

    async def start(self) -> None:
        """Connect, and start the relays (restarted whenever they exit)."""
        self._engine = create_engine(self._url, pool_size=1)
        await self._direct.start()
        self._relays.start()
        self._supervising = asyncio.create_task(self._relays.supervise())

    async def feed(self, records: Sequence[Record], rate: float) -> None:
        """Write ``records`` at ``rate`` per second (or send them, see the module), then wait
        until every row is published or dead."""
        rows, direct = _split(records, self.topic)
        # The direct records keep their places in the pace: each goes when its turn comes.
        await asyncio.gather(
            self._write_paced(rows, rate),
            self._direct.feed([r for _, r in direct], rate, [place for place, _ in direct]),
        )
        await self._settled()
        self._ends = await self._topic_ends()

    async def _write_paced(self, rows: list[tuple[int, dict[str, Any]]], rate: float) -> None:
        """Write each of ``rows`` (with its place in the send order) when its turn comes."""
        started = time.monotonic()
        written = 0
        while written < len(rows):
            due = int((time.monotonic() - started) * rate) + 1
            upto = bisect_left(rows, due, key=lambda row: row[0])
            if upto > written:
                await self._write([row for _, row in rows[written:upto]])
                written = upto
            await asyncio.sleep(TICK_SECONDS)

    def ends(self) -> dict[int, int]:
        """partition -> the topic's end once every row settled (until then, the direct
        sends' acknowledged ends)."""
        return dict(self._ends) or self._direct.ends()

    async def stop(self) -> None:
        """Stop the relays and disconnect."""
        if self._supervising is not None:
            self._supervising.cancel()
            await asyncio.gather(self._supervising, return_exceptions=True)
        self._relays.stop()
        await self._direct.stop()
        if self._engine is not None:
            await self._engine.dispose()

    async def _topic_ends(self) -> dict[int, int]:
        """The topic's end offsets (asked again while the broker cannot answer)."""
        while True:
            try:
                async with asyncio.timeout(LOOKUP_SECONDS):
                    return await end_offsets(
                        self.bootstrap, self.topic, list(range(self.partitions))
                    )
            except (KafkaError, OSError, TimeoutError) as exc:
                log.info("end offsets not read (%r); asking again", exc)
                await asyncio.sleep(RESEND_PAUSE_SECONDS)

    async def _write(self, rows: list[dict[str, Any]]) -> None:
        """Insert ``rows`` in one transaction; after a write the database did not confirm,
        insert those of them that did not land."""
        assert self._engine is not None
        pending = rows
        while pending:
            try:
                async with self._engine.begin() as conn:
                    await conn.execute(_INSERT, pending)
                return
            except (SQLAlchemyError, OSError) as exc:
                log.info("outbox write failed (%s); writing again", type(exc).__name__)
                self.rewrites += len(pending)
                await asyncio.sleep(RESEND_PAUSE_SECONDS)
                pending = await self._missing(pending)

    async def _missing(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Those of ``rows`` not in the outbox (all of them while it cannot be read)."""
        assert self._engine is not None
        while True:
            try:
                async with self._engine.connect() as conn:
                    ids = [row["event_id"] for row in rows]
                    landed = set((await conn.execute(_LANDED, {"ids": ids})).scalars())
                return [row for row in rows if row["event_id"] not in landed]
            except (SQLAlchemyError, OSError):
                await asyncio.sleep(RESEND_PAUSE_SECONDS)

    async def _settled(self) -> None:
        """Wait until no row is pending or being published (a row a relay gave up on loses
        its event, which the soak's check of the effects finds)."""
        assert self._engine is not None
        while True:
            try:
                async with self._engine.connect() as conn:
                    if not (await conn.execute(_UNSETTLED)).scalar_one():
                        return
            except (SQLAlchemyError, OSError):
                pass
            await asyncio.sleep(POLL_SECONDS)


def _split(
    records: Sequence[Record], topic: str
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, Record]]]:
    """The outbox rows of ``records`` and the records that go straight to the topic, each
    with its place in the send order."""
    rows: list[tuple[int, dict[str, Any]]] = []
    direct: list[tuple[int, Record]] = []
    written: set[str] = set()
    for place, record in enumerate(records):
        row = _row(record, topic)
        if row is None or row["event_id"] in written:
            direct.append((place, record))
            continue
        written.add(row["event_id"])
        rows.append((place, row))
    return rows, direct


def _row(record: Record, topic: str) -> dict[str, Any] | None:
    """The outbox row that the relay turns into ``record`` (None: a value no row carries)."""
    try:
        envelope = json.loads(record.value)
    except ValueError:
        return None
    headers = dict(record.headers)
    return {
        "event_id": headers["id"].decode(),
        "aggregate_type": envelope.get("aggregateType", AGGREGATE_TYPE),
        "aggregate_id": record.key.decode(),
        "event_type": headers["eventType"].decode(),
        "topic": topic,
        "payload": record.value.decode(),
        "aggregate_version": envelope.get("aggregateVersion"),
    }
