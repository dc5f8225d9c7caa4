"""A partition's fetch position as faust's Kafka consumer holds it now, read without waiting.

aiokafka's ``AIOKafkaConsumer.position()`` waits until the partition has a position,
and while the consumer cannot find one (its leader unreachable, or a leader its
metadata still names after the leadership moved: aiokafka asks that broker again and
again without refreshing) it never returns. faust runs that call on its consumer
thread, whose two workers also run every offset commit: a ``/metrics`` scrape each
second asks for the lag, two such calls hold both workers, and then no offset is
committed any more; a rebalance waits for its commit forever, and SIGTERM with it.
A timeout on the caller's side does not help: the call stays on the thread. Lag
therefore reads the position the consumer holds, None while it has none.
"""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition


def known_position(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int | None:
    """``consumer``'s fetch position in ``tp`` now; None while it has none or ``tp`` is not
    assigned. Safe from another thread: it only reads."""
    subscription: Any = consumer._subscription.subscription
    assignment = subscription.assignment if subscription is not None else None
    state = assignment.state_value(tp) if assignment is not None else None
    if state is None or not state.has_valid_position:
        return None
    return int(state.position)


def faust_consumer(app: Any) -> AIOKafkaConsumer | None:
    """The aiokafka consumer on faust's consumer thread; None before it started."""
    thread = getattr(app.consumer, "_thread", None)
    return getattr(thread, "_consumer", None)
