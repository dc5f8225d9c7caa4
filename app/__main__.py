"""``python -m app``, installed as ``effectively-once``: the project's command line.

Each command lives in a small module exposing ``register(cli)``; list the
module here to add it. Modules are imported only when the CLI runs.
``effectively-once dlq ...`` is ``python -m dlq ...``.
"""

from __future__ import annotations

from importlib import import_module

import typer

from app.cli_run import run

COMMAND_MODULES = (
    "app.demo.cli",
    "app.demo.broker_cli",
    "app.trace.cli",
    "dlq.cli",
    "app.outbox.relay_cli",
    "app.outbox.cli",
    "app.db.cleanup_cli",
)


def build_cli() -> typer.Typer:
    """The typer application with every command module registered."""
    cli = typer.Typer(
        help="effectively-once: apply each event's effect exactly once, in order.",
        no_args_is_help=True,
        add_completion=False,
    )
    # A callback keeps typer in multi-command mode even while only one command exists.
    cli.callback()(lambda: None)
    for name in COMMAND_MODULES:
        import_module(name).register(cli)
    return cli


def main() -> None:
    """Entry point of the ``effectively-once`` console script."""
    run(build_cli(), "effectively-once")


if __name__ == "__main__":
    run(build_cli(), "python -m app")
