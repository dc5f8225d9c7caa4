"""faust's Kafka transport: its topic declarations outlast a broker that is down, and its
consumer has the fetch wait our settings ask for and a fetch loop that delivers records
without a race per record (``app.runtime.drain``).

faust creates a missing topic (at start: its leader topic, the retry tiers, the DLT)
by asking the first broker in its metadata for the controller and sending the
request there. With that broker down (crashed, restarting) the request fails with
``NodeNotReadyError`` and the worker's start fails: the process exits, and exits
again on each restart until the metadata stops naming that broker. ``Transport``
tries such a declaration again with fresh metadata for up to
``TOPIC_DECLARE_SECONDS``: Kafka drops a dead broker from its metadata once it
stopped heartbeating for ``broker.session.timeout.ms`` (9 s by default).

faust builds its aiokafka consumer with ``fetch_max_wait_ms`` pinned at 1,500:
how long the broker may hold a fetch open when it has nothing new. A broker
that answers a waiting fetch as soon as data arrives (Apache Kafka) makes that
an idle cost only; one that holds every fetch for the whole wait adds up to
1.5 s to each event's latency. ``FETCH_MAX_WAIT_MS`` sets it, and on any broker
the cost of a short wait is one more empty fetch per wait while a partition is idle.

``FETCH_MIN_BYTES`` (64 KiB) lets the broker gather records before it answers, for
``FETCH_MAX_WAIT_MS`` at most: Kafka's ``fetch.min.bytes``, which faust leaves at one
byte. At one byte a broker answers every fetch as soon as one record arrives, and
under a steady load the worker spends its time on fetches of a few records each
(a tenth of its samples at 7,500 events/s); the records a fetch brings are the
batch's start, so the wait moves from the worker's batch to the broker.

faust stops taking a partition's fetched records while its stream buffer is under
pressure and takes them again once it drops; a fetch that started meanwhile waited
out its whole timeout (1 s) for data that was already there, once per buffer's worth
under a backlog. The consumer wakes that fetch when a partition resumes.

A seek to the committed offsets (every rebalance, and whenever faust drops a fetch
that came back while the flow was stopped) moves only the partitions that have one:
aiokafka leaves a partition with nothing committed yet where its fetch left it, past
records that were fetched and never processed. Those were then counted as skipped
and committed past: the group's first seconds lost events at its first rebalance.
The consumer takes such a partition back to its earliest offset (``rewind``).

Its close is bounded, and a cancellation aiokafka's close lets escape ends it
(``consumer_close``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

import faust
from aiokafka.errors import (
    CommitFailedError,
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    TopicAuthorizationFailedError,
)
from faust.transport.consumer import ensure_TP
from faust.transport.drivers import aiokafka as driver
from faust.transport.producer import Producer as FaustProducer

from app.errors import ConfigurationError
from app.runtime.boot import refuse
from app.runtime.broker_wait import until_connected
from app.runtime.consumer_close import close_within, wait_empty_within
from app.runtime.drain import drain_messages, read_denied
from app.runtime.offsets import add_gap, new_offset, read_before, with_floor

TOPIC_DECLARE_SECONDS = 60.0
TOPIC_RETRY_SECONDS = 1.0
METADATA_SECONDS = 10.0
EARLIEST_SECONDS = 10.0  # a partition's earliest offset, asked at a seek
log = logging.getLogger("effectively_once.worker")


class Producer(driver.Producer):
    """faust's aiokafka producer whose start waits out a broker that went away."""

    async def on_start(self) -> None:
        await FaustProducer.on_start(self)  # faust's own part; the driver's follows

        async def connect() -> None:
            producer = self._producer = self._new_producer()
            try:
                await producer.start()
            except KafkaConnectionError:
                self._producer = None
                with contextlib.suppress(Exception):
                    await producer.stop()
                raise
            self.beacon.add(producer)

        await until_connected(connect, "producer")


class Transport(driver.Transport):
    """faust's aiokafka transport whose topic declarations, producer and consumer wait out a
    broker that is down."""

    Producer = Producer

    async def _create_topic(
        self, owner: Any, client: Any, topic: str, partitions: int, replication: int, **kwargs: Any
    ) -> None:
        deadline = time.monotonic() + TOPIC_DECLARE_SECONDS
        while True:
            try:
                await super()._create_topic(owner, client, topic, partitions, replication, **kwargs)
                return
            except Exception as exc:
                if not _broker_trouble(exc) or time.monotonic() >= deadline:
                    raise
                log.warning("declaring topic %r failed (%r); trying again", topic, exc)
            await asyncio.sleep(TOPIC_RETRY_SECONDS)
            with contextlib.suppress(KafkaError, TimeoutError):
                async with asyncio.timeout(METADATA_SECONDS):
                    await client.force_metadata_update()


def _broker_trouble(exc: BaseException) -> bool:
    """A broker down or not the one to ask: worth another try with fresh metadata."""
    if isinstance(exc, KafkaError):
        return bool(exc.retriable)
    # faust's words for a CreateTopics request sent to a broker that is not the controller.
    return isinstance(exc, RuntimeError) and "Invalid controller" in str(exc)


def consumer_class(fetch_max_wait_ms: int, fetch_min_bytes: int = 1) -> type[driver.Consumer]:
    """faust's aiokafka ``Consumer`` whose fetches wait at most ``fetch_max_wait_ms`` for
    ``fetch_min_bytes``."""

    class ConsumerThread(driver.AIOKafkaConsumerThread):
        async def on_start(self) -> None:
            async def connect() -> None:
                consumer = self._consumer = self._create_consumer(loop=self.thread_loop)
                self.time_started = time.monotonic()
                try:
                    await consumer.start()
                except KafkaConnectionError:
                    self._consumer = None
                    with contextlib.suppress(Exception):
                        await consumer.stop()
                    raise

            await until_connected(connect, "consumer")

        def wake_fetch(self) -> None:
            """Wake a fetch waiting on this thread's loop, so that it drains again with the
            partitions active now (see ``Consumer.on_buffer_drop``)."""
            consumer = self._consumer
            if consumer is None or consumer._fetcher is None:
                return
            fetcher = consumer._fetcher
            self.thread_loop.call_soon_threadsafe(wake_waiters, fetcher)

        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer.stop = partial(close_within, consumer.stop)
            consumer.commit = partial(self._commit_unless_denied, consumer.commit)
            # Read by AIOKafkaConsumer.start(), which builds the fetcher; start() comes after.
            consumer._fetch_max_wait_ms = fetch_max_wait_ms
            consumer._fetch_min_bytes = fetch_min_bytes
            return consumer

        async def _commit_unless_denied(self, commit: Any, *args: Any, **kwargs: Any) -> Any:
            """aiokafka's ``commit``; an ACL revoked under the worker (Read on its group)
            stops it with one line and exit code 2 (``drain.read_denied``), where faust's
            commit logged a traceback and crashed the worker (exit code 1). The commit is
            then told faust as one a rebalance made moot: not done, nothing logged."""
            try:
                return await commit(*args, **kwargs)
            except (GroupAuthorizationFailedError, TopicAuthorizationFailedError) as exc:
                app = self.consumer.app
                why = ConfigurationError(read_denied(exc, app))
                self.parent_loop.call_soon_threadsafe(refuse, app, why)
                raise CommitFailedError(f"not committed, already rebalanced: {why}") from None

    class Consumer(driver.Consumer):
        seek_epoch = 0  # seeks done (``drain``: a fetch from before one is not delivered)

        def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        async def wait_empty(self) -> None:
            if self.app.should_stop:  # the worker stops: bounded (a revocation waits)
                await wait_empty_within(super().wait_empty)
            else:
                await super().wait_empty()

        def on_buffer_drop(self, tp: Any) -> None:
            resumed = tp in self._buffered_partitions
            super().on_buffer_drop(tp)
            if resumed:
                thread: Any = self._thread  # ours: ``_new_consumer_thread``
                thread.wake_fetch()

        async def _drain_messages(self, fetcher: Any) -> None:
            await drain_messages(self, fetcher)

        async def perform_seek(self) -> None:
            committed = await self.seek_to_committed()
            fresh = [tp for tp, offset in committed.items() if not offset]
            known = with_floor(committed, await self._earliest(fresh))
            if fresh:
                thread: Any = self._thread
                floors = {tp: known[tp] for tp in fresh}
                await thread.call_thread(rewind, thread._ensure_consumer(), floors)
            self._read_offset.update(read_before(known))
            self._committed_offset.update(
                {ensure_TP(tp): offset for tp, offset in known.items() if offset is not None}
            )
            self.seek_epoch += 1

        async def _earliest(self, partitions: list[Any]) -> Mapping[Any, int]:
            """The earliest offsets of ``partitions``; none when the broker does not say
            within ``EARLIEST_SECONDS`` (faust's own bookkeeping then, as before)."""
            if not partitions:
                return {}
            try:
                async with asyncio.timeout(EARLIEST_SECONDS):
                    return await self.earliest_offsets(*partitions)
            except (KafkaError, TimeoutError, OSError) as exc:
                log.warning("earliest offsets of %d partition(s) unknown: %r", len(partitions), exc)
                return {}

        async def _add_gap(self, tp: Any, offset_from: int, offset_to: int) -> None:
            add_gap(self._gap[tp], self._committed_offset[tp], offset_from, offset_to)

        def _new_offset(self, tp: Any) -> int | None:
            return new_offset(
                self._acked[tp], self._acked_index[tp], self._gap[tp], self._committed_offset[tp]
            )

    return Consumer


async def rewind(consumer: Any, floors: Mapping[Any, int | None]) -> None:
    """Seek each partition of ``floors`` (an aiokafka consumer's, on its own loop) to its
    offset there, or to its earliest offset where that is None (not known)."""
    unknown = [tp for tp, offset in floors.items() if offset is None]
    for tp, offset in floors.items():
        if offset is not None:
            consumer.seek(tp, offset)
    if unknown:
        await consumer.seek_to_beginning(*unknown)


def wake_waiters(fetcher: Any) -> None:
    """Complete every wait of ``fetcher.fetched_records``: each drains again at once."""
    for waiter in list(fetcher._fetch_waiters):
        fetcher._notify(waiter)


def set_fetch(app: faust.App, fetch_max_wait_ms: int, fetch_min_bytes: int = 1) -> None:
    """Make ``app``'s Kafka consumer's fetches wait at most ``fetch_max_wait_ms`` for
    ``fetch_min_bytes``."""
    if isinstance(app.transport, driver.Transport):
        fetching = consumer_class(fetch_max_wait_ms, fetch_min_bytes)
        app.transport.Consumer = fetching  # type: ignore[misc]
