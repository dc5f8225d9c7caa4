"""``HANDLER_MODULES`` is an allowlist: only the handlers of the modules it names run.

Contract: a consumer registered by a module outside the list (``billing``, which the
listed ``revenue`` imports) stops the worker at start: ``faust -A app worker`` prints
one ``ConfigurationError`` line naming that module and its consumer, and exits with
code 2, before any migration or topic; listed, the same module is accepted. A
listed package covers its submodules (``shop`` covers ``shop.handlers``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.errors import ConfigurationError
from app.handler_modules import check_allowlist
from app.registry import Registry, handler

REPO_ROOT = Path(__file__).resolve().parents[2]

REVENUE = """\
from pydantic import BaseModel

from app import Envelope, HandlerContext, event_model, handler

import billing  # noqa: F401 - its handler registers too, from outside HANDLER_MODULES


@event_model("InvoicePaid", version=1)
class InvoicePaid(BaseModel):
    customer: str
    cents: int


@handler("InvoicePaid", consumer="revenue-service")
async def add_revenue(event: Envelope[InvoicePaid], ctx: HandlerContext) -> None:
    pass
"""

BILLING = """\
from pydantic import BaseModel

from app import Envelope, HandlerContext, event_model, handler


@event_model("InvoiceSent", version=1)
class InvoiceSent(BaseModel):
    customer: str


@handler("InvoiceSent", consumer="billing-service")
async def bill(event: Envelope[InvoiceSent], ctx: HandlerContext) -> None:
    pass
"""


def build_the_worker(folder: Path, handler_modules: str) -> subprocess.CompletedProcess[str]:
    """``python -c 'import app; app.app'`` (what ``faust -A app`` does) in ``folder``."""
    return subprocess.run(
        [sys.executable, "-c", "import app; app.app"],
        cwd=folder,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(folder)]),
            "HANDLER_MODULES": handler_modules,
            "DATABASE_URL": f"sqlite:///{folder / 'service.db'}",
            "TMPDIR": str(folder),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_handler_registered_from_outside_the_list_stops_the_worker(tmp_path: Path) -> None:
    (tmp_path / "revenue.py").write_text(REVENUE)
    (tmp_path / "billing.py").write_text(BILLING)

    refused = build_the_worker(tmp_path, "revenue")

    assert refused.returncode == 2, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("effectively-once: configuration error: HANDLER_MODULES='revenue'")
    assert "'billing' registers consumer 'billing-service'" in line
    assert "revenue-service" not in line

    assert build_the_worker(tmp_path, "revenue,billing").returncode == 0


def test_a_listed_package_covers_its_submodules() -> None:
    registry = Registry()
    for module in ("shop.handlers", "shop", "shopping"):
        written_in: dict[str, object] = {"__name__": module}
        exec("async def fn(event, ctx):\n    pass", written_in)
        handler("OrderPaid", consumer=f"c-{module}", registry=registry)(written_in["fn"])  # type: ignore[arg-type]

    with pytest.raises(ConfigurationError) as refused:
        check_allowlist(registry, ["shop"])
    assert "'shopping' registers consumer 'c-shopping'" in str(refused.value)
    assert "'shop.handlers'" not in str(refused.value)
    check_allowlist(registry, ["shop", "shopping"])
