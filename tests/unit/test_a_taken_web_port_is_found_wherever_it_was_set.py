"""A worker's web port that another process holds is found at start, however it was set.

Contract (``app.runtime.web_port.taken_web_port``): the port faust's worker will listen
on comes from ``--web-port``, else the ``WEB_PORT`` environment variable (as faust's
settings read it), else faust's default; whichever it is, a port another process
listens on is named, with the option and the variable to change it. A free one is not. A
port that is no number from 1 to 65,535, and an address to bind that this host does not
have, are named too.
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


@pytest.mark.parametrize("value", ["abc", "70000", "-1", "0"])
def test_a_web_port_that_is_no_port_number_is_named(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """faust ended in a 58-line traceback (``int()`` of ``abc``, ``Port`` out of range)."""
    monkeypatch.setenv("WEB_PORT", value)

    assert taken_web_port(WORKER) == f"WEB_PORT is {value!r}, not a port number (1 to 65535)"


def test_a_web_bind_this_host_does_not_have_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEB_PORT", str(_free_port()))
    worker = [*WORKER[:-2], "--web-bind", "192.0.2.1"]  # TEST-NET-1: no host's address

    why = taken_web_port(worker)

    assert why is not None and why.startswith("WEB_BIND is '192.0.2.1', not an address")
