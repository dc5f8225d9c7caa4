"""``@handler``: how consumers declare what they do with which event.

Registration mistakes raise ``ConfigurationError`` at import, not at 3 a.m.
"""

from __future__ import annotations

import difflib
import inspect
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.db.tables import OUTBOX_TOPIC
from app.errors import ConfigurationError
from app.handler_signature import mismatch
from dlq.topics import topic_name
from schemas.registry import is_known_event_type, known_event_types

HandlerFn = Callable[[Any, Any], Awaitable[None]]

_CONSUMER_NAME_MAX = 100
# What Kafka accepts as a topic name, cut to the outbox's topic column (OUTBOX_TOPIC).
TOPIC_NAME = topic_name(OUTBOX_TOPIC)


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One registered handler: which consumer runs ``fn`` on which event type."""

    event_type: str
    consumer: str
    fn: HandlerFn
    non_retryable: tuple[type[BaseException], ...] = ()
    batch: bool = False
    emits: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``module.function``, for logs and failure records."""
        return f"{self.fn.__module__}.{self.fn.__qualname__}"


@dataclass
class Registry:
    """Every handler, grouped by consumer and event type."""

    _by_consumer: dict[str, dict[str, list[HandlerSpec]]] = field(default_factory=dict)
    # Consumers the handler modules register that another deployment runs (``only``).
    elsewhere: frozenset[str] = frozenset()

    def add(self, spec: HandlerSpec) -> None:
        """Register ``spec``; the same function twice for one event and consumer is a mistake."""
        handlers = self._by_consumer.setdefault(spec.consumer, {}).setdefault(spec.event_type, [])
        for existing in handlers:
            if existing.name == spec.name:
                raise ConfigurationError(
                    f"{spec.name} is registered twice for {spec.event_type!r} "
                    f"in consumer {spec.consumer!r}"
                )
        handlers.append(spec)

    @property
    def consumers(self) -> list[str]:
        """Consumer names, sorted: each is a namespace of dedup records and versions."""
        return sorted(self._by_consumer)

    @property
    def event_types(self) -> frozenset[str]:
        """The eventTypes at least one consumer has a handler for: whose payloads matter here."""
        return frozenset(
            event_type
            for by_type in self._by_consumer.values()
            for event_type, handlers in by_type.items()
            if handlers
        )

    @property
    def emitted_topics(self) -> frozenset[str]:
        """The topics the handlers name in ``emits``: the worker declares them at start."""
        return frozenset(topic for spec in self.specs() for topic in spec.emits)

    def specs(self) -> list[HandlerSpec]:
        """Every registered handler, consumer by consumer."""
        return [
            spec
            for consumer in self.consumers
            for handlers in self._by_consumer[consumer].values()
            for spec in handlers
        ]

    def handlers_for(self, consumer: str, event_type: str) -> list[HandlerSpec]:
        """The handlers ``consumer`` runs for ``event_type`` (often none)."""
        return self._by_consumer.get(consumer, {}).get(event_type, [])

    def only(self, consumers: Sequence[str]) -> Registry:
        """A registry of ``consumers``' handlers alone; a name none registered is a mistake."""
        unknown = sorted(set(consumers) - set(self._by_consumer))
        if unknown:
            raise ConfigurationError(
                f"CONSUMERS: no @handler registers {', '.join(map(repr, unknown))}; "
                f"the handler modules register {', '.join(map(repr, self.consumers))}"
            )
        kept = {name: self._by_consumer[name] for name in consumers}
        return Registry(kept, frozenset(self._by_consumer) - set(kept))

    def clear(self) -> None:
        """Forget every handler (tests only)."""
        self._by_consumer.clear()


default_registry = Registry()


def handler(
    event_type: str,
    *,
    consumer: str,
    non_retryable: tuple[type[BaseException], ...] = (),
    batch: bool = False,
    emits: tuple[str, ...] = (),
    registry: Registry | None = None,
) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``async def fn(event, ctx)`` as ``consumer``'s handler of ``event_type``.

    ``non_retryable`` lists exception types that send the event straight to the
    DLT instead of through the retry tiers.

    ``batch=True`` registers ``async def fn(events, ctx)`` instead: it receives a
    list of events of ``event_type``, at most one per aggregate, each already
    preceded by its aggregate's earlier versions, so it can write them with a
    few multi-row statements. If it raises, the framework re-runs the batch one
    event at a time (``fn`` then receives one-element lists) to find the culprit.
    """
    if not isinstance(event_type, str) or not is_known_event_type(event_type):
        where = _caller_module()
        close = difflib.get_close_matches(
            str(event_type), sorted(known_event_types()), n=1, cutoff=0.85
        )
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigurationError(
            f"@handler in {where}: unknown event type {event_type!r}{hint}; register its payload "
            f"model with @event_model({event_type!r}, version=1) in {where}, or in a module "
            f"{where} imports, before this @handler"
        )
    if (
        not isinstance(consumer, str)
        or not consumer
        or len(consumer) > _CONSUMER_NAME_MAX
        or consumer.strip() != consumer
    ):
        raise ConfigurationError(
            f"@handler: consumer must be a non-empty name of at most {_CONSUMER_NAME_MAX} "
            f"characters without surrounding spaces, got {consumer!r}"
        )
    if not isinstance(non_retryable, tuple):
        raise ConfigurationError(
            f"@handler: non_retryable must be a tuple of exception types, got {non_retryable!r}"
        )
    for exc_type in non_retryable:
        if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)):
            raise ConfigurationError(
                f"@handler: non_retryable holds {exc_type!r}, not an exception type"
            )

    if not isinstance(emits, tuple) or not all(
        isinstance(topic, str) and TOPIC_NAME.fullmatch(topic) for topic in emits
    ):
        raise ConfigurationError(
            "@handler: emits must be a tuple of topic names (1 to 128 of the letters, digits, "
            f"'.', '_' and '-' Kafka accepts), got {emits!r}"
        )

    def register(fn: HandlerFn) -> HandlerFn:
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(f"@handler: {name} must be an `async def` function")
        params = inspect.signature(fn).parameters
        if len(params) != 2:
            raise ConfigurationError(
                f"@handler: {name} must take exactly (event, ctx), it takes {list(params)}"
            )
        wrong = mismatch(fn, event_type, batch)
        if wrong:
            raise ConfigurationError(f"@handler: {name}'s first parameter: {wrong}")
        spec = HandlerSpec(event_type, consumer, fn, tuple(non_retryable), batch, emits)
        (registry or default_registry).add(spec)
        return fn

    return register


def _caller_module() -> str:
    """The module that wrote ``@handler(...)``: two frames up, past ``handler`` itself."""
    frame = sys._getframe(2)
    return str(frame.f_globals.get("__name__", "your handler module"))
