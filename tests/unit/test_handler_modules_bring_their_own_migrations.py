"""Each handler module's ``migrations`` folder is found from ``HANDLER_MODULES`` alone.

Contract: a package's folder is inside it, a module's is its package's (two
modules of one package share one history); each history's version table is
named after its package, cut to an identifier PostgreSQL accepts; a module
without such a folder brings nothing; a module that does not exist is a
``ConfigurationError``, and ``python -m app.db.migrate`` then prints one line
and exits with code 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.db.histories import FRAMEWORK, History, histories, version_table_of
from app.errors import ConfigurationError


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``billing/`` (package with ``migrations/``, modules ``a`` and ``b``), ``plain/`` (a
    package without), and ``solo.py`` beside a ``migrations/`` folder, importable."""
    for folder in ("billing/migrations", "plain", "migrations"):
        (tmp_path / folder).mkdir(parents=True)
    for module in ("billing/__init__.py", "billing/a.py", "billing/b.py", "plain/__init__.py"):
        (tmp_path / module).write_text("")
    (tmp_path / "solo.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_each_folder_is_one_history_named_after_its_package(tree: Path) -> None:
    billing = History(
        (tree / "billing" / "migrations").resolve(), "effectively_once_version_billing"
    )
    solo = History((tree / "migrations").resolve(), "effectively_once_version_solo")

    assert histories(["billing.a", "plain", "billing", "billing.b", "solo"]) == [
        FRAMEWORK,
        billing,
        solo,
    ]
    assert histories([]) == [FRAMEWORK]


def test_a_long_package_name_still_makes_a_valid_distinct_table_name() -> None:
    long_a, long_b = (
        "company.platform.orders." + "x" * 40 + ".a",
        "company.platform.orders." + "x" * 40 + ".b",
    )

    assert version_table_of("shop.handlers") == "effectively_once_version_shop_handlers"
    assert len(version_table_of(long_a)) == 63
    assert version_table_of(long_a) != version_table_of(long_b)
    assert version_table_of(long_a) == version_table_of(long_a)


def test_a_module_that_does_not_exist_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="HANDLER_MODULES: cannot import 'nope'"):
        histories(["handlers", "nope"])
    with pytest.raises(ConfigurationError, match=r"cannot import 'nope\.inner'"):
        histories(["nope.inner"])

    ran = subprocess.run(
        [sys.executable, "-m", "app.db.migrate"],
        env={
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
            "HANDLER_MODULES": "nope",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2
    assert ran.stderr.strip().splitlines() == [
        "effectively-once: configuration error: "
        "HANDLER_MODULES: cannot import 'nope': no such module"
    ]
