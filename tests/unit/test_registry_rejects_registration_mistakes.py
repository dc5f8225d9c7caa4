"""Handler registration mistakes fail at import with a ``ConfigurationError``.

Contract: ``@handler(event_type, consumer=..., non_retryable=...)`` raises
``ConfigurationError`` (never registering anything) when the function is not
``async def``, does not take exactly ``(event, ctx)``, the event type has no
payload model registered (the message names the module to register it in), the
consumer name is empty, longer than 100 characters or has surrounding spaces,
``non_retryable`` holds anything but exception types, ``emits`` anything but a tuple of
names Kafka accepts as topics, or the same function is registered twice for one
event type and consumer. ``@event_model(event_type, version)`` refuses an event type
that is not a string spelt without surrounding spaces and a version that is not a whole
number from 1 (``"2"``, ``0``, ``True``), before registering anything.

The event's type hint is checked against what the worker hands the handler: the payload
model itself (``event: OrderPaid``) is refused, naming the envelope to write
(``Envelope[OrderPaid]``); so are a list for a handler of one event, one event for a batch
handler, and an envelope of a model the event type is not declared with. Hints it cannot
resolve or does not know (``Any``, none, a name only a type checker sees) pass. An event
type spelt close to a declared one is named (``did you mean``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

from app.errors import ConfigurationError
from app.registry import Registry, handler
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderPaid
from schemas.registry import event_model, model_count


async def good(event: Any, ctx: Any) -> None:
    """A valid handler."""


async def one_arg(event: Any) -> None:
    """Forgot ``ctx``."""


async def three_args(event: Any, ctx: Any, extra: Any) -> None:
    """One too many."""


def not_async(event: Any, ctx: Any) -> None:
    """Forgot ``async``."""


async def async_generator(event: Any, ctx: Any) -> Any:
    """``async def`` with ``yield`` is not a coroutine function."""
    yield event


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (not_async, "must be an `async def` function"),
        (async_generator, "must be an `async def` function"),
        (lambda event, ctx: None, "must be an `async def` function"),
        (one_arg, "must take exactly (event, ctx)"),
        (three_args, "must take exactly (event, ctx)"),
    ],
)
def test_a_function_of_the_wrong_shape_is_rejected(fn: Any, message: str) -> None:
    registry = Registry()

    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        handler("OrderPaid", consumer="points", registry=registry)(fn)

    assert registry.consumers == []


@pytest.mark.parametrize("event_type", ["OrderShipped", "orderpaid", "", "OrderPaid "])
def test_an_event_type_without_a_payload_model_is_rejected(event_type: str) -> None:
    with pytest.raises(ConfigurationError, match="unknown event type") as raised:
        handler(event_type, consumer="points", registry=Registry())

    assert f"@event_model({event_type!r}, version=1) in {__name__}" in str(raised.value)


@pytest.mark.parametrize("consumer", ["", " points", "points ", "x" * 101, None])
def test_a_bad_consumer_name_is_rejected(consumer: Any) -> None:
    with pytest.raises(ConfigurationError, match="consumer must be a non-empty name"):
        handler("OrderPaid", consumer=consumer, registry=Registry())


def test_a_consumer_name_of_exactly_100_characters_is_fine() -> None:
    registry = Registry()

    handler("OrderPaid", consumer="x" * 100, registry=registry)(good)

    assert registry.consumers == ["x" * 100]


@pytest.mark.parametrize(
    "non_retryable",
    [
        ("KeyError",),
        (KeyError, 42),
        (KeyError(),),
        (int,),
        # The forgotten comma: ``(KeyError)`` is the class itself, not a tuple of it.
        (KeyError),
    ],
    ids=["a-name", "a-number", "an-instance", "not-an-exception", "forgotten-comma"],
)
def test_non_retryable_must_hold_exception_types(non_retryable: Any) -> None:
    with pytest.raises(ConfigurationError, match="non_retryable"):
        handler("OrderPaid", consumer="points", non_retryable=non_retryable, registry=Registry())


@pytest.mark.parametrize(
    "emits",
    ["invoices", ("invoices", ""), ("in voices",), ("x" * 129,), (42,)],
    ids=["forgotten-comma", "empty", "a-space", "too-long", "a-number"],
)
def test_emits_must_hold_topic_names(emits: Any) -> None:
    with pytest.raises(ConfigurationError, match="emits must be a tuple of topic names"):
        handler("OrderPaid", consumer="points", emits=emits, registry=Registry())


def test_emitted_topics_are_known_to_the_registry() -> None:
    registry = Registry()

    async def issue(event: object, ctx: object) -> None:  # pragma: no cover - never run
        pass

    handler("OrderPaid", consumer="a", emits=("invoices", "audit"), registry=registry)(issue)
    handler("OrderCreated", consumer="b", emits=("invoices",), registry=registry)(issue)

    assert registry.emitted_topics == {"invoices", "audit"}


def test_the_same_function_twice_for_one_event_and_consumer_is_rejected() -> None:
    registry = Registry()
    handler("OrderPaid", consumer="points", registry=registry)(good)

    with pytest.raises(ConfigurationError, match="registered twice"):
        handler("OrderPaid", consumer="points", registry=registry)(good)

    assert len(registry.handlers_for("points", "OrderPaid")) == 1


@pytest.mark.parametrize(
    ("event_type", "version", "message"),
    [
        ("CrateSealed", "2", "version must be a whole number from 1"),
        ("CrateSealed", 0, "version must be a whole number from 1"),
        ("CrateSealed", True, "version must be a whole number from 1"),
        ("CrateSealed ", 1, "spelt exactly without surrounding spaces"),
        ("", 1, "spelt exactly without surrounding spaces"),
    ],
)
def test_an_event_model_of_a_wrong_type_or_version_is_refused(
    event_type: Any, version: Any, message: str
) -> None:
    before = model_count()

    with pytest.raises(ConfigurationError, match=message):

        @event_model(event_type, version=version)
        class CrateSealed(BaseModel):
            crate: str

    assert model_count() == before


async def payload(event: OrderPaid, ctx: Any) -> None:
    """Annotated with the payload model."""


async def listed(events: list[Envelope[OrderPaid]], ctx: Any) -> None:
    """A list, for a handler of one event."""


async def single(event: Envelope[OrderPaid], ctx: Any) -> None:
    """One event, for a batch handler; right for a handler of one."""


async def listed_payloads(events: list[OrderPaid], ctx: Any) -> None:
    """A list of payloads."""


async def other_model(event: Envelope[OrderCancelled], ctx: Any) -> None:
    """Another event type's model."""


async def unresolvable(event: NotImportedHere, ctx: Any) -> None:  # type: ignore[name-defined]  # noqa: F821
    """A name only a type checker would see."""


@pytest.mark.parametrize(
    ("fn", "batch", "message"),
    [
        (payload, False, "annotate it Envelope[OrderPaid] and read the payload as event.data"),
        (listed, False, "a handler of lists is registered with batch=True"),
        (single, True, "annotate it list[Envelope[OrderPaid]]"),
        (listed_payloads, True, "annotate it list[Envelope[OrderPaid]]"),
        (other_model, False, "the payload of 'OrderPaid' is OrderPaid"),
    ],
)
def test_a_type_hint_the_event_cannot_match_is_refused(fn: Any, batch: bool, message: str) -> None:
    registry = Registry()
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        handler("OrderPaid", consumer="points", batch=batch, registry=registry)(fn)
    assert registry.consumers == []


async def any_model(event: BaseModel, ctx: Any) -> None:
    """Any pydantic model: an envelope is one."""


async def any_models(events: list[BaseModel], ctx: Any) -> None:
    """A list of any pydantic models."""


@pytest.mark.parametrize(
    ("fn", "batch"),
    [
        (single, False),
        (listed, True),
        (unresolvable, False),
        (any_model, False),
        (any_models, True),
    ],
)
def test_a_type_hint_that_can_match_passes(fn: Any, batch: bool) -> None:
    registry = Registry()
    handler("OrderPaid", consumer="points", batch=batch, registry=registry)(fn)
    assert registry.consumers == ["points"]


def test_an_event_type_spelt_close_to_a_declared_one_is_named() -> None:
    with pytest.raises(ConfigurationError, match="did you mean 'OrderPaid'"):
        handler("OrderPayd", consumer="points", registry=Registry())
