"""What a handler's type hint says it receives, against what the worker hands it.

A handler receives the envelope (``Envelope[OrderPaid]``: ``event.data`` is the payload),
a batch handler a list of them. A hint naming the payload model itself (``event:
OrderPaid``, the habit of frameworks that hand over the body), a list where one event
comes (or one event where a list comes), or an envelope of another event type's model
would pass every import and fail on every event, each one routed through the retry tiers
to the DLT. ``mismatch`` says so at import. Hints it cannot resolve (names imported only
for type checkers) and hints it does not know (``Any``, ``dict``, a protocol) are left
alone: the check only refuses what is certainly wrong.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from schemas.envelope import Envelope
from schemas.registry import registered_models

_LISTS = {list, tuple, Sequence, Iterable}


def mismatch(fn: Callable[..., Any], event_type: str, batch: bool) -> str | None:
    """Why ``fn``'s first parameter's hint cannot be what it receives; None if it can."""
    hint = _first_hint(fn)
    if hint is None:
        return None
    listed = typing.get_origin(hint) in _LISTS
    if batch and not listed and _is_model(hint):
        return (
            f"it is a batch handler (batch=True) and receives a list of events: annotate it "
            f"list[{_envelope_of(hint)}]"
        )
    if not batch and listed:
        return "it receives one event; a handler of lists is registered with batch=True"
    item = (typing.get_args(hint) or (Any,))[0] if listed else hint
    payload = _payload_hint(item)
    if payload is not None:
        return (
            f"it receives the envelope, not the payload: annotate it "
            f"{'list[' if batch else ''}Envelope[{payload.__name__}]{']' if batch else ''} "
            "and read the payload as event.data"
        )
    return _other_model(item, event_type)


def _first_hint(fn: Callable[..., Any]) -> Any:
    """The resolved hint of ``fn``'s first parameter; None if it has none or it cannot be
    resolved here."""
    params = list(inspect.signature(fn).parameters)
    if not params:
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # a name only a type checker sees: nothing to check against
        return None
    return hints.get(params[0])


def _is_model(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, BaseModel)


def _payload_hint(hint: Any) -> type[BaseModel] | None:
    """``hint`` if it is a payload model (a pydantic model that cannot hold an envelope:
    ``BaseModel`` itself can)."""
    if _is_model(hint) and not issubclass(hint, Envelope) and not issubclass(Envelope, hint):
        return typing.cast(type[BaseModel], hint)
    return None


def _envelope_of(hint: Any) -> str:
    payload = _payload_hint(hint)
    if payload is not None:
        return f"Envelope[{payload.__name__}]"
    return str(getattr(hint, "__name__", "Envelope"))


def _other_model(item: Any, event_type: str) -> str | None:
    """Why ``Envelope[Model]`` cannot hold ``event_type``'s payload: ``Model`` is neither a
    model registered for it (any version) nor one of their bases or subclasses."""
    if not _is_model(item) or not issubclass(item, Envelope):
        return None
    args = item.__pydantic_generic_metadata__["args"]
    if len(args) != 1 or not _is_model(args[0]):
        return None
    named = args[0]
    models = [m for (t, _), m in registered_models().items() if t == event_type]
    if not models or any(issubclass(m, named) or issubclass(named, m) for m in models):
        return None
    expected = " | ".join(sorted({m.__name__ for m in models}))
    return (
        f"its envelope holds {named.__name__}, but the payload of {event_type!r} is {expected} "
        f"(@event_model): annotate it Envelope[{expected}]"
    )
