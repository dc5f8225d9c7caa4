"""Which framework code a worker ran: a fingerprint of its source files.

The framework may be edited while a long run is under way; each row records
the fingerprint its worker started with, so rows measured on different code
are flagged instead of compared.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import app

PACKAGES = ("app", "handlers", "schemas", "dlq")
WORKER_MODULES = ("bench/bare_app.py",)  # what the bench's workers load besides PACKAGES
ROOT = Path(app.__file__).resolve().parent.parent


def fingerprint() -> str:
    """12 hex digits over the path and bytes of every ``.py`` file a worker may load."""
    paths = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    paths += [ROOT / module for module in WORKER_MODULES]
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
