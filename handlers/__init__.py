"""The example consumers, one module each; importing this package registers their handlers.

- ``points``: points-service, loyalty points for paid orders.
- ``inventory``: inventory-service, stock reservations for created orders.
- ``notification``: notification-service, one message per order event.

Their tables are on ``example_metadata`` (``handlers.tables``), created by the
package's own migrations (``handlers/migrations``) only where ``handlers`` is
among ``HANDLER_MODULES``.
"""

from handlers import inventory as inventory
from handlers import notification as notification
from handlers import points as points
from handlers.tables import example_metadata

__all__ = ["example_metadata", "inventory", "notification", "points"]
