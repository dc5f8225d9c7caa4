"""``replay`` and ``skip`` take the same options, and ``--help`` shows every choice.

Contract: the two commands declare one set of parameters (same names, kinds,
types and defaults), declared once; the ``--help`` of ``list``, ``replay`` and
``skip`` names every status ``--status`` accepts and every dlt-reason
``--reason`` accepts.
"""

from __future__ import annotations

import inspect

import pytest
from typer.testing import CliRunner

from dlq import cli as dlq_cli
from dlq.dead import FailureStatus
from dlq.policy import DeadReason


def test_replay_and_skip_declare_one_set_of_options() -> None:
    replay, skip = inspect.signature(dlq_cli.replay), inspect.signature(dlq_cli.skip)

    assert replay == skip
    assert len(replay.parameters) == 17
    assert dlq_cli.replay.__code__ is dlq_cli.skip.__code__


@pytest.mark.parametrize("command", ["list", "replay", "skip"])
def test_help_names_every_status_and_reason(command: str) -> None:
    shown = CliRunner().invoke(dlq_cli.cli, [command, "--help"], env={"COLUMNS": "400"})

    assert shown.exit_code == 0, shown.output
    text = "".join(shown.output.split())  # the choices may wrap anywhere
    for choice in [*FailureStatus, *DeadReason]:
        assert choice.value in text, f"{choice.value} missing from {command} --help"
