"""Shared by every test: how a missing service is reported.

Locally, a test whose database, Redis or broker is not there is skipped, so
``pytest`` runs on a laptop with nothing installed. In CI (``CI=true``) the
same absence fails the test: a suite that silently skipped its integration
tests would report green without having checked anything.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

# The tests speak the example's events: its payload models are registered in every test
# process (a service's own process registers only what its handler modules import).
import schemas.order  # noqa: F401


def in_ci() -> bool:
    """True under ``CI=true``, where nothing may be skipped for lack of a service."""
    return os.environ.get("CI") == "true"


def unavailable(what: str) -> NoReturn:
    """Skip the current test because ``what`` is missing; fail it instead under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{what} (CI=true, so a missing service is a failure)", pytrace=False)
    pytest.skip(what)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controlling process stops the run's shared broker (see ``session_broker``)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from tests.integration.support.session_broker import run_root, stop_shared_broker

    stop_shared_broker(run_root(session.config._tmp_path_factory.getbasetemp()))
