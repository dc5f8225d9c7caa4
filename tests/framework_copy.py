"""The framework without the example package, beside a user's own handler package.

``framework_without_examples(dest)`` copies ``app``, ``schemas`` and ``dlq``
(not ``handlers``) into ``dest`` and writes ``shop``: a handler package as a
user writes it, importing only from ``app``, with its own event type, its
own table and its own Alembic revision in ``shop/migrations``.

A Python started with ``PYTHONPATH=dest`` sees nothing of the checkout: the
copy's ``sitecustomize`` drops the editable install's import finder, which
would otherwise still supply ``handlers`` from the checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FRAMEWORK_PACKAGES = ("app", "schemas", "dlq")
CONSUMER = "revenue-service"
TABLE = "shop_revenue"

SITECUSTOMIZE = """\
import sys

sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
"""

SHOP = '''\
"""revenue-service: a paid invoice adds its cents to the customer's revenue."""

from pydantic import BaseModel
from sqlalchemy import BigInteger, Column, MetaData, String, Table

from app import Envelope, HandlerContext, add_to_counter, event_model, handler

metadata = MetaData()
revenue = Table(
    "shop_revenue",
    metadata,
    Column("customer", String(128), primary_key=True),
    Column("cents", BigInteger, nullable=False),
)


@event_model("InvoicePaid", version=1)
class InvoicePaid(BaseModel):
    customer: str
    cents: int


@handler("InvoicePaid", consumer="revenue-service")
async def add_revenue(event: Envelope[InvoicePaid], ctx: HandlerContext) -> None:
    row = {"customer": event.data.customer, "cents": event.data.cents}
    await add_to_counter(ctx.session, revenue, "customer", "cents", [row])
'''

SHOP_MIGRATION = '''\
"""The revenue table.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shop_revenue",
        sa.Column("customer", sa.String(128), primary_key=True),
        sa.Column("cents", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("shop_revenue")
'''


def framework_without_examples(dest: Path) -> Path:
    """Write the copy into ``dest`` (created); returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for package in FRAMEWORK_PACKAGES:
        shutil.copytree(
            REPO_ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (dest / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (dest / "shop" / "migrations").mkdir(parents=True)
    (dest / "shop" / "__init__.py").write_text(SHOP)
    (dest / "shop" / "migrations" / "0001_revenue.py").write_text(SHOP_MIGRATION)
    return dest
