"""Run a command line: a usage mistake is one line on stderr and exit code 2; output that is
piped keeps its columns (``output_console``).

click (through typer) prints a usage mistake as the usage line, a hint, and the message in
a box drawn over several lines; a script or an operator's terminal then reads six lines
for one mistake. ``run`` prints ``<prog>: error: <message> (see <command> --help)``
instead; everything else (help, the commands' own output and exit codes) is click's.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

USAGE_EXIT_CODE = 2
PIPED_WIDTH = 220
PLAIN: dict[str, Any] = {"highlight": False, "soft_wrap": True, "markup": False, "emoji": False}
"""How the operator commands print: what they show (ids, keys, errors) is a producer's or a
database's text, never rich markup or emoji codes (``x[/]y`` raised, ``:A:`` became an
emoji); their own styles are ``Text`` styles."""


def error_console() -> Console:
    """The console a command prints its errors on (stderr, ``PLAIN``)."""
    return Console(stderr=True, **PLAIN)


def labelled(label: str, message: object, style: str = "bold red") -> Text:
    """``label`` in ``style``, then ``message`` as it is (no markup read in it)."""
    return Text.assemble((label, style), f" {message}")


def output_console() -> Console:
    """The console a command prints its tables on: piped output is not cut to rich's 80
    columns (unless ``COLUMNS`` says so): ids are long, and read by grep and scripts."""
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return Console(**PLAIN, width=None if wide else PIPED_WIDTH)


def run(cli: typer.Typer, prog_name: str, args: list[str] | None = None) -> NoReturn:
    """Run ``cli`` as ``prog_name`` on ``args`` (default: the process's) and exit."""
    command = typer.main.get_command(cli)
    try:
        returned = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except typer.Abort:
        print("Aborted!", file=sys.stderr)
        raise SystemExit(1) from None
    except typer.TyperException as exc:  # click's exceptions, as typer ships them
        code = getattr(exc, "exit_code", 1)
        message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
        if message and code == USAGE_EXIT_CODE:  # a usage mistake: its context names the command
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else prog_name
            message = f"{message} (see {where} --help)"
        if message:  # none when click printed the help for a group given no command
            print(f"{prog_name}: error: {message}", file=sys.stderr)
        raise SystemExit(code) from None
    raise SystemExit(returned if isinstance(returned, int) else 0)
