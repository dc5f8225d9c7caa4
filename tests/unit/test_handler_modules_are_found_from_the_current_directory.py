"""``HANDLER_MODULES`` resolve from the current directory, as uvicorn resolves its app.

Contract: ``faust -A app worker`` (the ``faust`` script, whose own folder heads
``sys.path``, not the current one) run in the folder holding a user's ``revenue/``
package, with ``HANDLER_MODULES=revenue`` and no ``PYTHONPATH`` to it, imports it
and registers its consumer; the migrations find ``revenue/migrations/`` the same
way, even in a process whose ``sys.path`` holds no entry for the current directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.db.histories import History, histories

REPO_ROOT = Path(__file__).resolve().parents[2]
FAUST = Path(sys.executable).with_name("faust")

REVENUE = """\
from pydantic import BaseModel

from app import Envelope, HandlerContext, event_model, handler


@event_model("InvoicePaid", version=1)
class InvoicePaid(BaseModel):
    customer: str
    cents: int


@handler("InvoicePaid", consumer="revenue-service")
async def add_revenue(event: Envelope[InvoicePaid], ctx: HandlerContext) -> None:
    pass
"""


@pytest.fixture
def service(tmp_path: Path) -> Path:
    """A user's service folder: ``revenue/`` with its handler and a ``migrations/`` folder."""
    (tmp_path / "revenue" / "migrations").mkdir(parents=True)
    (tmp_path / "revenue" / "__init__.py").write_text(REVENUE)
    return tmp_path


def test_the_faust_script_finds_the_package_in_the_current_directory(service: Path) -> None:
    if not FAUST.exists():
        pytest.skip(f"no faust script beside {sys.executable}")
    # PYTHONPATH names the checkout (the framework under test), never the service folder.
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "HANDLER_MODULES": "revenue",
        "DATABASE_URL": f"sqlite:///{service / 'revenue.db'}",
        "TMPDIR": str(service),
    }
    listed = subprocess.run(
        [str(FAUST), "-A", "app", "agents"],
        cwd=service,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert listed.returncode == 0, listed.stderr
    assert "@effectively-once:main" in listed.stdout


def test_migrations_find_the_package_in_the_current_directory(
    service: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = os.getcwd()
    monkeypatch.setattr(
        sys, "path", [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    )
    monkeypatch.chdir(service)

    found = histories(["revenue"])

    assert found[1:] == [
        History((service / "revenue" / "migrations").resolve(), "effectively_once_version_revenue")
    ]
