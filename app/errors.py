"""The one exception tree of effectively-once.

::

    EffectivelyOnceError
     ├── ConfigurationError        a mistake in settings or handler registration;
     │                             raised at import or start-up, never at run time
     │    ├── BrokerRefused        the broker will not serve a client as configured: it
     │    │                        refused the login, its certificate is not trusted or
     │    │                        does not name the host, or it lacks a feature asked for
     │    └── DatabaseRefused      the database will not serve the TLS its URL asks for:
     │                             its certificate is not trusted or does not name the
     │                             host, or it offers no TLS
     ├── InvalidOutboxEvent        (also a ValueError) an event handed to the outbox
     │                             writer that no row can hold; raised to the caller,
     │                             inside its transaction, before anything is written
     ├── EventError                the event's own fault: it is routed, never retried in place
     │    ├── RetryableError       a handler failed; the event may succeed later
     │    ├── PermanentError       a handler says retrying cannot help (non-retryable)
     │    │    └── EventIdReused    the eventId is another event's, which this consumer
     │    │                         applied or parked: a producer reused the id
     │    └── PoisonError          the bytes cannot become an event at all
     │         ├── UndecodableError      not JSON, or not a JSON object
     │         ├── InvalidSchemaError    the envelope or its ``data`` fails validation
     │         ├── InvalidHeaderError    a header this framework reads (``retry-*``,
     │         │                         ``dlt-*``) holds what it never writes
     │         └── UnsupportedVersionError  a known eventType at an eventVersion no model reads
     └── InfrastructureError       not the event's fault (``pipeline.classify`` sorts any
                                   exception by its code): the database, Redis or the
                                   broker unreachable or silent past its deadline
                                   (connection), a transaction that lost a race
                                   (conflict), or a statement the server cancelled
                                   (statement). The batch pauses and is retried in place;
                                   it is never dead-lettered and its offsets never move.
                                   A statement cancelled again and again is escalated:
                                   the batch runs event by event and the event whose
                                   handler meets it is routed.
          ├── BrokerUnreachable    no broker could be connected to (down, unreachable,
          │                        silent, or closing the connection): wait and retry
          └── BrokerDenied         the cluster's ACLs deny the principal what it needs
                                   (to write a topic, an idempotent producer): wait and
                                   retry in place, the denial named on ``/ready``, until
                                   an ACL allows it

Any other exception a handler raises counts as retryable unless the handler
declares its type non-retryable (``@handler(..., non_retryable=(KeyError,))``).
"""

from __future__ import annotations

from collections.abc import Callable


class EffectivelyOnceError(Exception):
    """Base of every error this framework raises on purpose."""


class ConfigurationError(EffectivelyOnceError):
    """Settings or handler registration are wrong; the worker must not start."""


class InvalidOutboxEvent(EffectivelyOnceError, ValueError):
    """An event given to the outbox writer (or ``ctx.emit``) cannot become a row."""


class EventError(EffectivelyOnceError):
    """Processing this one event failed because of the event (or its handler)."""

    reason: str = "retryable"


class RetryableError(EventError):
    """A handler failed in a way that may succeed on a later attempt."""


class PermanentError(EventError):
    """A handler failed in a way no retry can fix; the event goes to the DLT directly."""

    reason = "non-retryable"


class HandlerTimedOut(RetryableError):
    """A handler's call ran past ``HANDLER_TIMEOUT_SECONDS`` and was cancelled (a call with
    no timeout of its own, say): the event is retried, and the worker goes on."""


class HandlerExited(PermanentError):
    """A handler raised ``SystemExit`` or ``KeyboardInterrupt``: it may not stop the
    worker. The event goes to the DLT, and the worker goes on."""


class EventIdReused(PermanentError):
    """The event's eventId names another event (another aggregate or version) that this
    consumer applied or parked: a producer reused the id. It is not a duplicate, and it
    cannot take effect under that id; it goes to the DLT."""


class PoisonError(EventError):
    """The record cannot be turned into an event; it goes to the DLT once."""

    reason = "poison"


class UndecodableError(PoisonError):
    """The value is not a JSON object."""

    reason = "undecodable"


class InvalidSchemaError(PoisonError):
    """The envelope or its payload fails validation."""

    reason = "invalid-schema"


class InvalidHeaderError(PoisonError):
    """A framework header (retry attempt, due time, provenance) cannot be read."""

    reason = "invalid-header"


class UnsupportedVersionError(PoisonError):
    """The eventType is known but no model reads this eventVersion."""

    reason = "unsupported-version"


class InfrastructureError(EffectivelyOnceError):
    """A dependency is down or a transaction conflicted: pause, then retry in place."""


class BatchGivenUp(EffectivelyOnceError):
    """A batch given up because it is no longer this worker's (a rebalance, or the worker
    stopping): withheld, not acked (nor any later batch of its assignment), read again by
    its partitions' next owner; what of it had committed is found applied then."""


class BrokerRefused(ConfigurationError):
    """The broker will not serve a client as configured; a setting must change."""


class DatabaseRefused(ConfigurationError):
    """The database will not serve the TLS its URL asks for; the URL must change."""


class BrokerUnreachable(InfrastructureError):
    """No bootstrap server could be connected to; the message says why, per server."""


class BrokerDenied(InfrastructureError):
    """The cluster's ACLs deny the principal an operation it needs; the message names it."""


def raised_at(exc: BaseException, kept: Callable[[str], bool]) -> str | None:
    """``file, line N`` of the innermost frame of ``exc``'s traceback whose file ``kept``
    accepts (the line of a user's package that raised it), or None."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if kept(filename):
            found = f"{filename}, line {tb.tb_lineno}"
        tb = tb.tb_next
    return found
