"""Build the worker's faust app from the environment, or exit with a clear message."""

from __future__ import annotations

import sys
from typing import Any

from pydantic import ValidationError

from app.errors import ConfigurationError
from app.registry import default_registry
from app.runtime.faust_app import create_app
from app.runtime.services import import_handlers
from app.settings import describe, get_settings


def build_app_or_exit() -> Any:
    """The faust app; a configuration mistake prints one clear line and exits with code 2."""
    try:
        settings = get_settings()
        registry = import_handlers(settings, default_registry)
    except ValidationError as exc:
        _exit("invalid settings:\n" + "\n".join(f"  {line}" for line in describe(exc)))
    except ConfigurationError as exc:
        _exit(str(exc))
    return create_app(settings, registry)


def _exit(message: str) -> None:
    print(f"effectively-once: configuration error: {message}", file=sys.stderr)
    raise SystemExit(2)
