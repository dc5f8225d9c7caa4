"""faust's fetch loop, without a race per record.

faust's ``Consumer._drain_messages`` hands each fetched record to the conductor as
``wait_first(callback(record), suspend_flow.wait())``: two tasks and an
``asyncio.wait`` per record, so that a delivery blocked while a rebalance stops the
flow is abandoned. Those are several turns of the event loop per record, on the loop
that also runs the batches' database work: at 3,000 records/s, with a batch in hand
most of the time, records reached the agent 100 to 400 ms after the broker had them
(a plain aiokafka consumer beside it: p99 46 ms).

A delivery can block only while the flow is stopped (a rebalance), the conductor
is rebuilding its index, the producer's buffer is over its limit, or a channel the
record goes to is full. ``drain_messages`` checks those first, with no turn of the
loop in between, and awaits the callback directly when none holds; otherwise it races
it against the flow's suspension exactly as faust does. Everything else (read
offsets, gaps, periodic commits, a turn of the loop every 100 records) is faust's,
with one more check.

A fetch's records are read from the positions of the last seek (a rebalance seeks
every assigned partition to its committed offset, and sets the read offsets to match).
A delivery may wait for the flow to resume (the conductor waits for it), so a whole
rebalance, its seek included, can happen while one record is delivered. That record
then must not set its partition's read offset (it would overwrite the seek's, and the
records the seek went back to would be dropped as read already, or skipped as a gap,
and committed past while nobody processed them), and the rest of its fetch is not
delivered: the next fetch reads them again from the new positions. ``seek_epoch``
(``transport``) counts the seeks.

The records of a topic with an ``Inbox`` (``app.inboxes``: the framework's agents;
the bench's bare faust agent has none) skip the conductor: they are appended to the
inbox, with no turn of the loop, unless the flow is stopped; the append then races the
flow's suspension as a delivery does (``inbox``).

A fetch the broker's ACLs refuse (no Read on a topic; the start's check can only ask for
Describe) stops the worker in one line with exit code 2 (``boot.refuse``), as a mistake
found at start does; faust's fetcher crashed on it with two tracebacks and exit code 1.
"""

from __future__ import annotations

import asyncio
from time import monotonic
from typing import Any

from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from faust.transport.consumer import CONSUMER_FETCHING

from app.errors import ConfigurationError
from app.runtime.boot import refuse
from app.runtime.inbox import Inbox
from app.runtime.offsets import gap_to_add
from app.runtime.topic_check import principal

YIELD_EVERY = 100  # records delivered between two turns of the loop, as in faust


def read_denied(
    exc: TopicAuthorizationFailedError | GroupAuthorizationFailedError, app: Any
) -> str:
    """One line for a fetch, or a commit of the group's offsets, the broker's ACLs refused
    (an ACL revoked while the worker runs; the start checks both)."""
    named = ", ".join(repr(t) for t in sorted(t for t in exc.args if isinstance(t, str)))
    clients = getattr(app, "broker_clients", None)
    who = principal(clients.security) if clients is not None else "this client's principal"
    if isinstance(exc, GroupAuthorizationFailedError):
        return (
            f"the broker denies {who} Read on group {named or '(not named)'} "
            "(GroupAuthorizationFailed): an ACL must allow Read on the consumer group "
            "(APP_ID; README: ACLs)"
        )
    return (
        f"the broker denies {who} Read on topic {named or '(not named)'} "
        "(TopicAuthorizationFailed): an ACL must allow Read (README: ACLs)"
    )


def flow_stopped(consumer: Any) -> bool:
    """True while a rebalance stops the flow: any delivery, or append to an inbox, waits."""
    return consumer.suspend_flow.is_set() or not consumer.app.flow_control.is_active()


def can_block(consumer: Any, message: Any) -> bool:
    """True when delivering ``message`` to the conductor now might wait (see the module
    docstring)."""
    app = consumer.app
    conductor = app.topics
    if flow_stopped(consumer) or conductor._tp_to_callback_lock.locked():
        return True
    buffer = app.producer.buffer
    if buffer.size > buffer.max_messages:
        return True
    channels = conductor._topic_name_index.get(message.topic, ())
    return any(channel.queue.full() for channel in channels)


async def drain_messages(consumer: Any, fetcher: Any) -> None:
    """faust's ``Consumer._drain_messages`` (the fetcher's loop) with the direct delivery."""
    callback = consumer.callback
    get_read_offset = consumer._read_offset.__getitem__
    set_read_offset = consumer._read_offset.__setitem__
    commit_every = consumer._commit_every
    acks_enabled_for = consumer.app.topics.acks_enabled_for
    flow_control = consumer.app.flow_control
    # Topics whose records skip faust's conductor (``inbox``); the bare faust app has none.
    inboxes: dict[str, Inbox] = getattr(consumer.app, "inboxes", None) or {}
    # When each partition last handed a stream a record: faust's check of stuck streams
    # reads it, and a record put in an inbox passes no faust stream (without this, every
    # partition was logged as a stream that "has not started processing").
    monitor = getattr(consumer.app, "monitor", None)
    inbound: dict[Any, float] = monitor.stream_inbound_time if monitor is not None else {}
    since_yield = 0
    try:
        while not (consumer._stopped.is_set() or fetcher._stopped.is_set()):
            consumer.diag.set_flag(CONSUMER_FETCHING)
            records = consumer.getmany(timeout=1.0)
            await asyncio.sleep(0)
            if consumer.should_stop:
                continue
            epoch = None  # the seeks done when this fetch returned
            async for tp, message in records:
                if epoch is None:
                    epoch = consumer.seek_epoch
                elif consumer.seek_epoch != epoch:
                    break  # sought since: read again from the new positions
                since_yield += 1
                if since_yield > YIELD_EVERY:
                    await asyncio.sleep(0)
                    since_yield = 0
                offset = message.offset
                read = get_read_offset(tp)
                if read is not None and offset < read:
                    continue  # read already (faust drops it too)
                skipped = gap_to_add(read, offset)
                if skipped is not None and acks_enabled_for(message.topic):
                    await consumer._add_gap(tp, *skipped)
                if commit_every is not None and consumer._n_acked >= commit_every:
                    consumer._n_acked = 0
                    await consumer.commit()
                inbox = inboxes.get(message.topic)
                if inbox is None:
                    if can_block(consumer, message):
                        await consumer.wait_first(callback(message), consumer.suspend_flow.wait())
                    else:
                        await callback(message)
                elif flow_stopped(consumer):
                    await consumer.wait_first(
                        inbox.put_when_open(flow_control, message), consumer.suspend_flow.wait()
                    )
                else:
                    inbox.put(message)
                if inbox is not None:
                    inbound[tp] = monotonic()
                if consumer.seek_epoch != epoch:
                    break  # sought meanwhile: the read offset is the seek's
                set_read_offset(tp, offset)
            consumer.diag.unset_flag(CONSUMER_FETCHING)
    except consumer.consumer_stopped_errors:
        if consumer.transport.app.should_stop:
            return  # stopping anyway
        raise
    except asyncio.CancelledError:
        if consumer.transport.app.should_stop:
            return
        raise
    except (TopicAuthorizationFailedError, GroupAuthorizationFailedError) as exc:
        # Read denied (Describe, which the start checks, granted), or the group's Read
        # revoked while the worker runs: a mistake, not a crash.
        refuse(consumer.app, ConfigurationError(read_denied(exc, consumer.app)))
    except Exception as exc:
        consumer.log.exception("Drain messages raised: %r", exc)
        raise
    finally:
        consumer.diag.unset_flag(CONSUMER_FETCHING)
