"""A usage mistake on any command line is one line on stderr and exit code 2.

Contract: ``python -m dlq``, ``python -m app`` and the ``effectively-once`` script answer a
bad argument, an unknown option, a missing argument or an unknown command with one line,
``<prog>: error: <message> (see <command> --help)``, exit code 2, nothing on stdout, no
traceback (click's own answer was the usage line, a hint and the message in a box: six
lines). Help still prints as before, exit code 0.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def ran(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("-m", "dlq", "show", "abc"),
            "python -m dlq: error: Invalid value: expected <dlt-partition>:<dlt-offset> such "
            "as 0:42 (or outbox:<id>), got 'abc' (see python -m dlq show --help)",
        ),
        (("-m", "dlq", "list", "--nope"), "python -m dlq: error: No such option: --nope"),
        (
            ("-m", "app", "trace"),
            "python -m app: error: Missing argument 'event_id'. (see python -m app trace --help)",
        ),
        (
            ("-m", "app", "nosuch"),
            "python -m app: error: No such command 'nosuch'. (see python -m app --help)",
        ),
        (
            ("-m", "app", "outbox", "requeue"),
            "python -m app: error: Invalid value: name the rows (their ids) or give --all, "
            "one of them",
        ),
        (
            ("-m", "app", "outbox", "requeue", "3", "--all"),
            "python -m app: error: Invalid value: name the rows (their ids) or give --all, "
            "not both",
        ),
        (
            (
                "-c",
                "import sys; sys.argv[1:] = ['dlq', 'show', '1']; from app.__main__ import "
                "main; main()",
            ),
            "effectively-once: error: Invalid value: expected <dlt-partition>:<dlt-offset>",
        ),
    ],
)
def test_one_line_and_exit_code_2(args: tuple[str, ...], said: str) -> None:
    answer = ran(*args)

    assert answer.returncode == 2, answer.stderr
    assert answer.stdout == ""
    (line,) = answer.stderr.splitlines()
    assert line.startswith(said), line


def test_help_is_still_help() -> None:
    answer = ran("-m", "dlq", "--help")

    assert answer.returncode == 0, answer.stderr
    assert "Usage: python -m dlq" in answer.stdout


@pytest.mark.parametrize("args", [("-m", "app"), ("-m", "app", "outbox"), ("-m", "dlq")])
def test_a_group_given_no_command_prints_its_help_and_no_empty_error(
    args: tuple[str, ...],
) -> None:
    answer = ran(*args)

    assert answer.returncode == 2
    assert "Usage:" in answer.stdout + answer.stderr
    assert "error:" not in answer.stderr, answer.stderr
