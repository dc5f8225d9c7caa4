"""The operator commands print a producer's text as it is: no rich markup, no emoji codes.

Contract: an eventId, aggregate id or error text holding rich's markup (``x[/]y``,
``[bold]``) or an emoji code (``:A:``) is printed literally by ``trace``, ``dlq`` and
``outbox``, on stdout and stderr, and never raises (``x[/]y`` ended ``dlq list`` and
``trace`` in a ``MarkupError`` traceback, and ``Invoice:A:`` was printed with an emoji).
Their own words keep their styles.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from app.__main__ import build_cli
from app.cli_run import PLAIN, labelled
from app.db.migrate import upgrade_to_head

ODD = ["x[/]y", "[bold]hidden", "Invoice:A:B"]


def test_the_consoles_print_markup_and_emoji_codes_literally() -> None:
    text = io.StringIO()
    console = Console(file=text, width=200, **PLAIN)
    for odd in ODD:
        console.print(odd)
        console.print(labelled("error:", odd))
    assert text.getvalue().splitlines() == [line for odd in ODD for line in (odd, f"error: {odd}")]


def test_trace_of_an_odd_event_id_says_it_literally(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    asyncio.run(upgrade_to_head(url))
    for odd in ODD:
        answer = CliRunner().invoke(build_cli(), ["trace", odd], env={"DATABASE_URL": url})
        assert answer.exit_code == 1, answer.output
        assert odd in answer.output
        assert "Traceback" not in answer.output
