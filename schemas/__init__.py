"""Pydantic event models: the envelope and one module per aggregate.

Importing this package registers no payload model: the example's (``schemas.order``)
register when the example handlers import them, so that a service of its own may
give the same event types models of its own.
"""

from schemas.envelope import Envelope, Event
from schemas.registry import event_model, is_known_event_type, model_for

__all__ = ["Envelope", "Event", "event_model", "is_known_event_type", "model_for"]
