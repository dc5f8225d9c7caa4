"""The optional drivers a setting needs, each installed with one of the package's extras.

A ``postgresql://`` URL needs asyncpg, a ``mysql://`` one aiomysql, ``REDIS_URL``
redis-py. Without it the first connection raised ``ModuleNotFoundError`` with a
traceback; ``require`` says at start which extra to install.
"""

from __future__ import annotations

from importlib.util import find_spec

PACKAGE = "effectively-once"


def require(module: str, extra: str, needed_by: str) -> None:
    """``ValueError`` naming the extra to install unless ``module`` can be imported."""
    if find_spec(module) is None:
        raise ValueError(
            f"{needed_by} needs the {module} driver, which is not installed: "
            f"pip install '{PACKAGE}[{extra}]'"
        )
