"""``HANDLER_MODULES=bench.one_consumer``: a worker that runs points-service and nothing else.

Importing ``handlers.points`` alone is not enough: Python runs the package's
``__init__`` first, and that imports (so registers) all three example
consumers. So this module lets them register, then keeps only points-service's
handlers in the registry the worker reads.
"""

from __future__ import annotations

import handlers  # noqa: F401 - registers the three example consumers
from app.registry import default_registry
from schemas.registry import known_event_types

CONSUMER = "points-service"

_kept = [
    spec
    for event_type in sorted(known_event_types())
    for spec in default_registry.handlers_for(CONSUMER, event_type)
]
default_registry.clear()
for _spec in _kept:
    default_registry.add(_spec)
