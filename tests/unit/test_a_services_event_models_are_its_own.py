"""A user's service owns its event types: the framework registers none of the example's.

Contract: in a process that imports the framework (``app``, its public names, the
worker's faust app) with ``HANDLER_MODULES`` naming only the user's package, no
example model is registered (``schemas.order`` is not even imported), so the user's
own ``OrderPaid`` v1 registers and its handler runs in the worker. With the example
package loaded too, the second ``OrderPaid`` v1 is a ``ConfigurationError`` naming
both models' modules, and the worker exits with that one line (code 2). A
``@handler`` for an event type no model reads names the module it is written in as
the place to register the model, not the framework's ``schemas/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

MINE = '''\
"""A user's billing service: its own OrderPaid, with nothing of the example's."""

from pydantic import BaseModel

from app import Envelope, HandlerContext, event_model, handler


@event_model("OrderPaid", version=1)
class OrderPaid(BaseModel):
    invoice: str
    cents: int


@handler("OrderPaid", consumer="billing")
async def bill(event: Envelope[OrderPaid], ctx: HandlerContext) -> None:
    pass
'''

TYPO = """\
from app import Event, HandlerContext, handler


@handler("InvoiceRefunded", consumer="billing")
async def refund(event: Event, ctx: HandlerContext) -> None:
    pass
"""

BUILD_THE_WORKER = """
import sys
import faust
import app
from app import Envelope, event_model, handler
from app.registry import default_registry
from schemas.registry import model_for
print(isinstance(app.app, faust.App), default_registry.consumers)
print(model_for("OrderPaid", 1).__module__, "schemas.order" in sys.modules)
"""


def run(tmp_path: Path, handler_modules: str) -> subprocess.CompletedProcess[str]:
    """``BUILD_THE_WORKER`` with ``HANDLER_MODULES`` (the user's modules in ``tmp_path``)."""
    (tmp_path / "mine.py").write_text(MINE)
    (tmp_path / "mine_typo.py").write_text(TYPO)
    return subprocess.run(
        [sys.executable, "-c", BUILD_THE_WORKER],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(tmp_path)]),
            "HANDLER_MODULES": handler_modules,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'billing.db'}",
            "TMPDIR": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_framework_registers_no_model_of_the_example(tmp_path: Path) -> None:
    built = run(tmp_path, "mine")

    assert built.returncode == 0, built.stderr
    assert built.stdout.splitlines()[:2] == ["True ['billing']", "mine False"]


def test_a_second_model_for_one_event_version_names_both_modules(tmp_path: Path) -> None:
    clash = run(tmp_path, "mine,handlers")

    assert clash.returncode == 2, clash.stderr
    [line] = clash.stderr.strip().splitlines()
    assert line.startswith("effectively-once: configuration error: ")
    assert "OrderPaid v1" in line
    assert "mine.OrderPaid" in line and "schemas.order.OrderPaid" in line


def test_an_unknown_event_type_points_at_the_users_module(tmp_path: Path) -> None:
    typo = run(tmp_path, "mine,mine_typo")

    assert typo.returncode == 2, typo.stderr
    [line] = typo.stderr.strip().splitlines()
    assert "unknown event type 'InvoiceRefunded'" in line
    assert "mine_typo" in line and "@event_model" in line
    assert "schemas/" not in line
