"""A deprecation our own code triggers fails the test that meets it.

Contract: under the suite's warning filters (``pyproject.toml``), a
``DeprecationWarning`` or ``PendingDeprecationWarning`` attributed to a
module of ``app``, ``handlers``, ``schemas``, ``dlq``, ``bench``, ``chaos``
or ``tests`` is raised as an error; one attributed to another package (a
name that merely starts the same way included) is only reported.
"""

from __future__ import annotations

import warnings

import pytest

OURS = ("app", "app.db.migrate", "handlers.points", "schemas", "dlq.cli", "bench.run", "chaos")
THEIRS = ("sqlalchemy.engine", "faust.app", "application", "dlqueue", "tests_extra")


def deprecation_from(module: str, category: type[Warning] = DeprecationWarning) -> None:
    warnings.warn_explicit("old API", category, f"{module}.py", 1, module=module)


@pytest.mark.parametrize("module", OURS)
@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning])
def test_a_deprecation_from_our_code_is_an_error(module: str, category: type[Warning]) -> None:
    with pytest.raises(category):
        deprecation_from(module, category)


@pytest.mark.parametrize("module", THEIRS)
def test_a_deprecation_from_elsewhere_is_only_reported(module: str) -> None:
    with warnings.catch_warnings(record=True) as reported:  # the suite's filters stay as they are
        deprecation_from(module)

    assert [w.category for w in reported] == [DeprecationWarning]
