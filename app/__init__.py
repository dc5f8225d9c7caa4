"""effectively-once: consume business events from Kafka, apply each effect exactly once, in order.

``faust -A app worker`` finds ``app.app``: the faust app is built on first
access, from the environment, so that importing the framework stays cheap.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(name)
    from app.runtime.entry import build_app_or_exit

    value = build_app_or_exit()
    globals()["app"] = value
    return value
