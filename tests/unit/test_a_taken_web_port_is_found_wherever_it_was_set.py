"""A worker's web port that another process holds is found at start, however it was set.

Contract (``app.runtime.web_port.taken_web_port``): the port faust's worker will listen
on comes from ``--web-port``, else the ``WEB_PORT`` environment variable (as faust's
settings read it), else faust's default; whichever it is, a port another process
listens on is named, with the option and the variable to change it. A free one is not.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from app.runtime.web_port import taken_web_port

WORKER = ["-A", "app", "worker", "--web-host", "127.0.0.1", "--web-bind", "127.0.0.1"]


@pytest.fixture
def held_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_held_port_given_on_the_command_line_is_named(held_port: int) -> None:
    why = taken_web_port([*WORKER, "--web-port", str(held_port)])

    assert why is not None and f"web port {held_port}" in why


def test_a_held_port_given_as_web_port_is_named(
    held_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEB_PORT", str(held_port))

    why = taken_web_port(WORKER)

    assert why is not None and f"web port {held_port}" in why
    assert "WEB_PORT" in why and "--web-port" in why


def test_the_command_lines_port_wins_over_web_port(
    held_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEB_PORT", str(held_port))

    assert taken_web_port([*WORKER, "--web-port", str(_free_port())]) is None


def test_a_free_port_given_as_web_port_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEB_PORT", str(_free_port()))

    assert taken_web_port(WORKER) is None
