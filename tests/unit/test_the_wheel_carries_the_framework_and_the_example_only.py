"""A production wheel carries the framework and the example, not the benchmark or the soak.

Contract: the files a wheel built from ``pyproject.toml`` holds, as setuptools itself
reads ``[tool.setuptools.packages.find]`` and ``package-data`` (the modules of each
package found, and its data files), are those of ``app``, ``dlq``, ``schemas`` and
``handlers`` with their subpackages and their migrations, and nothing under
``bench/``, ``chaos/`` or ``tests/``. Those run from a checkout: ``python -m bench``
from its root, and the benchmark's workers (``-A bench.bare_app`` among them) get the
checkout on their ``PYTHONPATH``, so nothing of theirs has to be installed.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from setuptools.config.pyprojecttoml import apply_configuration
from setuptools.dist import Distribution

from bench.worker import WorkerConfig, worker_env

REPO_ROOT = Path(__file__).resolve().parents[2]


def wheel_files() -> set[str]:
    """The paths inside a wheel of this checkout (without its ``.dist-info``)."""
    dist = Distribution()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "[tool.setuptools] support is still beta"
        apply_configuration(dist, str(REPO_ROOT / "pyproject.toml"))
    files: set[str] = set()
    for package in dist.packages or []:
        folder = REPO_ROOT / package.replace(".", "/")
        files |= {path.relative_to(REPO_ROOT).as_posix() for path in folder.glob("*.py")}
        for pattern in (dist.package_data or {}).get(package, []):
            files |= {path.relative_to(REPO_ROOT).as_posix() for path in folder.glob(pattern)}
    return files


def test_the_wheel_holds_the_framework_and_the_example_and_nothing_else() -> None:
    files = wheel_files()

    assert {path.split("/")[0] for path in files} == {"app", "dlq", "handlers", "schemas"}
    assert {
        "app/__init__.py",
        "app/__main__.py",
        "app/runtime/faust_app.py",
        "app/db/migrations/env.py",
        "app/db/migrations/script.py.mako",
        "app/db/migrations/versions/0001_framework_tables.py",
        "dlq/__main__.py",
        "schemas/order.py",
        "handlers/points.py",
        "handlers/migrations/0001_example_tables.py",
    } <= files


def test_the_benchmarks_workers_import_it_from_the_checkout() -> None:
    config = WorkerConfig("kafka://localhost:9092", "orders", 1, 100, 0.05)

    env = worker_env(config, app_id="bench-test")

    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
