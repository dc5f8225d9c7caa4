"""Which payload model reads which ``(eventType, eventVersion)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from app.errors import ConfigurationError

ModelT = TypeVar("ModelT", bound=type[BaseModel])

_MODELS: dict[tuple[str, int], type[BaseModel]] = {}
_TYPES: set[str] = set()  # the eventTypes of _MODELS, asked once per outcome


def event_model(event_type: str, version: int = 1) -> Callable[[ModelT], ModelT]:
    """Register the decorated pydantic model as the payload of ``event_type`` at ``version``.

    ``event_type`` is the ``eventType`` producers send, spelt exactly (no space around it);
    ``version`` its ``eventVersion``, a whole number from 1. Anything else is refused here,
    at import, rather than making every such event poison later."""
    if not isinstance(event_type, str) or not event_type or event_type != event_type.strip():
        raise ConfigurationError(
            f"@event_model: the event type must be the eventType producers send, spelt "
            f"exactly without surrounding spaces; got {event_type!r}"
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigurationError(
            f"@event_model({event_type!r}): version must be a whole number from 1 (the "
            f"eventVersion producers send, e.g. version=2); got {version!r}"
        )

    def register(model: ModelT) -> ModelT:
        existing = _MODELS.get((event_type, version))
        if existing is not None and existing is not model:
            raise ConfigurationError(
                f"@event_model: {event_type} v{version} already has a model, "
                f"{_name(existing)}; {_name(model)} cannot be a second one (one process "
                "reads one event type one way: load only one of their modules)"
            )
        _MODELS[(event_type, version)] = model
        _TYPES.add(event_type)
        return model

    return register


def _name(model: type[BaseModel]) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def model_for(event_type: str, version: int) -> type[BaseModel] | None:
    """The payload model of ``event_type`` at ``version``, or ``None``."""
    return _MODELS.get((event_type, version))


def is_known_event_type(event_type: str) -> bool:
    """True when at least one version of ``event_type`` has a model."""
    return event_type in _TYPES


def registered_models() -> dict[tuple[str, int], type[BaseModel]]:
    """Every ``(eventType, eventVersion)`` with a model, and its model (a copy)."""
    return dict(_MODELS)


def model_count() -> int:
    """How many ``(eventType, eventVersion)`` have a model (models are only ever added)."""
    return len(_MODELS)


def known_event_types() -> set[str]:
    """Every eventType with at least one model."""
    return set(_TYPES)
