"""At start: is the port the worker's web server will listen on free?

faust binds the worker's web server (``/ready``, ``/metrics``) on ``--web-bind``
(``WEB_BIND``, ``0.0.0.0``) and ``--web-port`` (``WEB_PORT``, 6066) once the worker has
started its services; a port another process holds (a second worker on the same host,
with the same port) ended it there with faust's traceback. The app is built before
faust reads the worker command's options, so they are read here from the command line
with faust's own command (click), failing those from the environment as faust's
settings read it (``WEB_PORT``, ``WEB_BIND``; faust's ``_env`` constants, its defaults,
read only ``FAUST_``- and ``F_``-prefixed names), and the port is bound once, as
faust's server will bind it (``SO_REUSEADDR``). A port that is no number from 1 to 65,535,
or an address this host does not have, is said in one line too (faust ended in its
traceback); any other failure to bind is left to faust.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from faust.types._env import WEB_BIND, WEB_PORT

MAX_PORT = 65_535


def worker_options(argv: Sequence[str]) -> dict[str, Any] | None:
    """The options of ``faust ... worker ...`` in ``argv`` (without the program), or None
    when it is not that command."""
    from faust.cli.faust import cli  # faust's command line, only where it runs

    try:
        # click's own parsing: faust's group would import the app (this module's caller).
        context = click.Group.make_context(cli, "faust", list(argv), resilient_parsing=True)
        state = vars(context)
        rest = [*state.get("_protected_args", state.get("protected_args", [])), *context.args]
        name, command, args = cli.resolve_command(context, rest)
        if name != "worker" or command is None:
            return None
        return dict(command.make_context(name, args, parent=context, resilient_parsing=True).params)
    except click.ClickException:
        return None  # faust says what is wrong with its command line


def taken_web_port(argv: Sequence[str] | None = None) -> str | None:
    """Why the worker's web server could not listen (its port is in use), or None."""
    if argv is None:
        program = Path(sys.argv[0])
        if "faust" not in (program.name, program.parent.name):  # faust, python -m faust
            return None  # not faust's command line: imported by a test, a relay, a script
        argv = sys.argv[1:]
    options = worker_options(argv)
    if options is None or not options.get("with_web", True):
        return None
    port = options.get("web_port") or os.environ.get("WEB_PORT") or WEB_PORT
    bind = options.get("web_bind") or os.environ.get("WEB_BIND") or WEB_BIND
    number = str(port).strip()
    if not (number.isdecimal() and 1 <= int(number) <= MAX_PORT):
        return f"WEB_PORT is {str(port)[:40]!r}, not a port number (1 to {MAX_PORT})"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
            return f"WEB_BIND is {bind!r}, not an address of this host ({exc.strerror})"
        if exc.errno != errno.EADDRINUSE:
            return None
        return (
            f"the web port {port} (on {bind}) is in use, by another worker on this host? "
            "Give each worker its own: faust -A app worker --web-port N (or WEB_PORT)"
        )
    return None
