"""faust's Kafka consumer, with the fetch wait our settings ask for and a fetch loop that
delivers records without a race per record (``app.runtime.drain``).

faust builds its aiokafka consumer with ``fetch_max_wait_ms`` pinned at 1,500:
how long the broker may hold a fetch open when it has nothing new. A broker
that answers a waiting fetch as soon as data arrives (Apache Kafka) makes that
an idle cost only; one that holds every fetch for the whole wait adds up to
1.5 s to each event's latency. ``FETCH_MAX_WAIT_MS`` sets it, and on any broker
the cost of a short wait is one more empty fetch per wait while a partition is idle.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as driver

from app.runtime.drain import drain_messages


def consumer_class(fetch_max_wait_ms: int) -> type[driver.Consumer]:
    """faust's aiokafka ``Consumer`` whose fetches wait at most ``fetch_max_wait_ms``."""

    class ConsumerThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            # Read by AIOKafkaConsumer.start(), which builds the fetcher; start() comes after.
            consumer._fetch_max_wait_ms = fetch_max_wait_ms
            return consumer

    class Consumer(driver.Consumer):
        def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        async def _drain_messages(self, fetcher: Any) -> None:
            await drain_messages(self, fetcher)

    return Consumer


def set_fetch_max_wait(app: faust.App, fetch_max_wait_ms: int) -> None:
    """Make ``app``'s Kafka consumer wait at most ``fetch_max_wait_ms`` for a fetch."""
    if isinstance(app.transport, driver.Transport):
        app.transport.Consumer = consumer_class(fetch_max_wait_ms)  # type: ignore[misc]
