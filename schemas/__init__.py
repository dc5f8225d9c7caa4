"""Pydantic event models: the envelope and one module per aggregate.

Importing this package registers every payload model shipped with the project.
"""

from schemas import order as order
from schemas.envelope import Envelope, Event
from schemas.registry import event_model, is_known_event_type, model_for

__all__ = ["Envelope", "Event", "event_model", "is_known_event_type", "model_for"]
