"""``CONSUMERS`` picks which of the registered consumers a worker runs.

Contract: with ``CONSUMERS`` empty a worker runs every consumer its
``HANDLER_MODULES`` register; with names, exactly those consumers and all of
their handlers, none of the others'; a name that no ``@handler`` registers
stops the start with a ``ConfigurationError`` naming it and the registered
ones (the worker entry prints it as one line, no traceback). The consumers
left out are known as run ``elsewhere`` (their retries are not this worker's
to report). The registry the handler modules filled is left as it was.
"""

from __future__ import annotations

import pytest

from app.errors import ConfigurationError
from app.registry import Registry, handler
from app.runtime.services import import_handlers
from app.settings import Settings


def filled() -> Registry:
    registry = Registry()

    async def award(event: object, ctx: object) -> None:  # pragma: no cover - never run
        pass

    async def reserve(event: object, ctx: object) -> None:  # pragma: no cover - never run
        pass

    async def release(event: object, ctx: object) -> None:  # pragma: no cover - never run
        pass

    handler("OrderPaid", consumer="points-service", registry=registry)(award)
    handler("OrderCreated", consumer="inventory-service", registry=registry)(reserve)
    handler("OrderCancelled", consumer="inventory-service", registry=registry)(release)
    return registry


def settings(consumers: str) -> Settings:
    # The handlers above are written in this module: HANDLER_MODULES lists it.
    return Settings(handler_modules=__name__, consumers=consumers)


def test_no_names_run_every_registered_consumer() -> None:
    registry = filled()

    running = import_handlers(settings(""), registry)

    assert running.consumers == ["inventory-service", "points-service"]


def test_named_consumers_run_with_all_their_handlers_and_nothing_else() -> None:
    registry = filled()

    running = import_handlers(settings("inventory-service"), registry)

    assert running.consumers == ["inventory-service"]
    assert [s.fn.__name__ for s in running.handlers_for("inventory-service", "OrderCreated")] == [
        "reserve"
    ]
    assert [s.fn.__name__ for s in running.handlers_for("inventory-service", "OrderCancelled")] == [
        "release"
    ]
    assert running.handlers_for("points-service", "OrderPaid") == []
    assert running.elsewhere == {"points-service"}
    assert registry.consumers == ["inventory-service", "points-service"]


def test_a_name_no_handler_registers_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as refused:
        import_handlers(settings("points-service, pointz-service"), filled())

    message = str(refused.value)
    assert "CONSUMERS" in message and "'pointz-service'" in message
    assert "'inventory-service'" in message and "'points-service'" in message
