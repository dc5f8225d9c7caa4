"""Local servers (brokers, proxies) as context managers: ``with Server(...) as s`` starts
``s`` and stops it on the way out, whatever happened inside."""

from __future__ import annotations

from typing import Any, Self


class Launched:
    """``__enter__`` is ``start()``, ``__exit__`` is ``stop()``."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
