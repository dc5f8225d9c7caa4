"""The registry answers which handlers a consumer runs for an event type.

Contract: ``@handler`` returns the function unchanged and files a frozen
``HandlerSpec`` under its consumer and event type in the registry it is given
(the default registry only when none is). ``handlers_for`` lists a consumer's
handlers of one type in registration order, or none; ``consumers`` lists the
consumer names sorted; one function may serve several types and consumers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from app.registry import HandlerSpec, Registry, default_registry, handler


async def on_paid(event: Any, ctx: Any) -> None:
    """Award points."""


async def on_paid_too(event: Any, ctx: Any) -> None:
    """Log the payment."""


def test_the_decorator_returns_the_function_and_files_a_spec() -> None:
    registry = Registry()

    returned = handler(
        "OrderPaid", consumer="points", non_retryable=(KeyError,), registry=registry
    )(on_paid)

    assert returned is on_paid
    [spec] = registry.handlers_for("points", "OrderPaid")
    assert spec == HandlerSpec("OrderPaid", "points", on_paid, (KeyError,))
    assert spec.name == f"{__name__}.on_paid"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.consumer = "other"  # type: ignore[misc]


def test_handlers_are_listed_in_registration_order_per_consumer_and_type() -> None:
    registry = Registry()
    handler("OrderPaid", consumer="points", registry=registry)(on_paid_too)
    handler("OrderPaid", consumer="points", registry=registry)(on_paid)
    handler("OrderCancelled", consumer="points", registry=registry)(on_paid)
    handler("OrderPaid", consumer="audit", registry=registry)(on_paid)

    assert [s.fn for s in registry.handlers_for("points", "OrderPaid")] == [on_paid_too, on_paid]
    assert [s.fn for s in registry.handlers_for("points", "OrderCancelled")] == [on_paid]
    assert [s.fn for s in registry.handlers_for("audit", "OrderPaid")] == [on_paid]
    assert registry.handlers_for("audit", "OrderCreated") == []
    assert registry.handlers_for("nobody", "OrderPaid") == []
    assert registry.consumers == ["audit", "points"]


def test_a_given_registry_leaves_the_default_registry_alone() -> None:
    registry = Registry()

    handler("OrderPaid", consumer="registry-isolation-check", registry=registry)(on_paid)

    assert "registry-isolation-check" not in default_registry.consumers


def test_clear_forgets_every_handler() -> None:
    registry = Registry()
    handler("OrderPaid", consumer="points", registry=registry)(on_paid)

    registry.clear()

    assert registry.consumers == []
    assert registry.handlers_for("points", "OrderPaid") == []
