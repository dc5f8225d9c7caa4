"""The standalone relay's port (``RELAY_METRICS_PORT``): ``/metrics`` and ``/ready``.

``/ready`` has the ``relay`` check of a worker's ``/ready`` (``RelayRunner.health``):
red, with why, when a setting or ACL of the broker refuses it, a topic its rows need is
missing, or no cycle ended for ``RELAY_STALL_SECONDS`` (a cycle that hangs). Beside it,
the worker's ``database`` and ``broker`` checks (``also``), so that a database or broker
out of reach is red at once, whether or not rows wait. The body is the worker's:
``status``, ``failed``, ``checks``. The port is taken before the relay starts, so a busy
one stops the start with nothing opened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.metrics import REGISTRY
from app.monitoring import readiness


def _starting() -> readiness.Check:
    return readiness.Check("relay", False, "the relay is starting")


class RelayPort:
    """``/metrics`` and ``/ready`` on one port; ``/ready`` asks ``health`` once it is set,
    and ``also`` (the checks of what the relay needs) at each request."""

    def __init__(self) -> None:
        self.health: Callable[[], readiness.Check] = _starting
        self.also: Callable[[], Awaitable[Sequence[readiness.Check]]] | None = None
        self._runner: web.AppRunner | None = None

    async def start(self, port: int, host: str = "0.0.0.0") -> None:
        """Listen on ``port`` of ``host`` (``0.0.0.0``: every address); ``OSError`` if it
        is taken, or ``host`` is no address of this machine."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/ready", self._ready)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host=host, port=port).start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _ready(self, _request: web.Request) -> web.Response:
        more = await self.also() if self.also is not None else ()
        report = readiness.Readiness((self.health(), *more))
        return web.json_response(report.body(), status=200 if report.ok else 503)
