"""Nothing, for a new database: the example consumers' tables moved to their own history.

Until this revision was emptied it created ``user_points``, ``points_award``,
``inventory_stock``, ``inventory_reservation`` and ``notification`` in every
database, whatever its handlers. Those tables now come from the example
package's own migrations (``handlers/migrations``, run only while
``handlers`` is among ``HANDLER_MODULES``), which take over the tables of a
database built before, rows and all. The revision stays, creating nothing,
so that databases recorded at ``0002`` keep a revision the framework knows.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-01
"""

from __future__ import annotations

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create nothing."""


def downgrade() -> None:
    """Drop nothing: the example tables of an older database belong to the example's history."""
