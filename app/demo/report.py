"""Print the demo's outcome with rich: a summary, a few tables and one verdict line."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.table import Table

from app.demo.expected import CONSUMERS, Expected
from app.demo.outbox_figures import OutboxFigures
from app.demo.progress import DbState
from app.demo.verdict import Verdict
from app.demo.workload import Workload

MAX_MISMATCHES_SHOWN = 20


def print_summary(
    console: Console, workload: Workload, produce_seconds: float, total_seconds: float
) -> None:
    """What was sent, with which imperfections, and how long it took."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("orders", f"{len(workload.plans):,}")
    grid.add_row(
        "events sent",
        f"{len(workload.messages):,} = {workload.distinct_events:,} distinct"
        f" + {workload.duplicates:,} duplicate sends",
    )
    grid.add_row(
        "out of order", f"{workload.swapped_aggregates:,} orders had two versions sent swapped"
    )
    grid.add_row("written in", f"{produce_seconds:.2f} s (orders and outbox, then the repeats)")
    grid.add_row(
        "consumed in",
        f"{total_seconds:.1f} s by {len(CONSUMERS)} consumers, from the first order written",
    )
    console.print(grid)


def print_outbox(console: Console, figures: OutboxFigures) -> None:
    """The outbox beside the balances: rows by status and how fast the relay shipped them."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    statuses = ", ".join(
        f"{count:,} {status}" for status, count in sorted(figures.by_status.items())
    )
    grid.add_row("outbox rows", statuses or "none")
    grid.add_row(
        "written to published",
        f"p50 {figures.percentile(0.5) * 1000:,.0f} ms, "
        f"p99 {figures.percentile(0.99) * 1000:,.0f} ms (shipped by the relay in the worker)",
    )
    console.print(grid)


def print_tables(console: Console, expected: Expected, state: DbState, top: int = 10) -> None:
    """The top balances and the most reserved skus, expected next to stored."""
    console.print(
        _side_by_side(f"Top {top} point balances", "user", expected.points, state.points, top)
    )
    console.print(
        _side_by_side(f"Top {top} reserved stock", "sku", expected.reserved, state.reserved, top)
    )


def print_verdict(console: Console, verdict: Verdict, expected: Expected) -> None:
    """One clear line; on a mismatch also the values that differ."""
    if verdict.ok:
        console.print(
            f"[bold green]✔ all {verdict.balances:,} balances and {verdict.stock_levels:,}"
            " stock levels match what the events mean[/] "
            f"({len(CONSUMERS)} consumers each took effect of the"
            f" {expected.distinct_events:,} distinct events exactly once)"
        )
        return
    table = Table("what", "key", "expected", "in database", title="Mismatches")
    for m in verdict.mismatches[:MAX_MISMATCHES_SHOWN]:
        table.add_row(m.what, m.key, f"{m.expected:,}", f"[red]{m.actual:,}[/]")
    console.print(table)
    console.print(
        f"[bold red]✘ MISMATCH: {len(verdict.mismatches):,} values differ from what the"
        " events mean[/]"
    )


def _side_by_side(
    title: str, key: str, expected: Mapping[str, int], actual: Mapping[str, int], top: int
) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(key)
    table.add_column("expected", justify="right")
    table.add_column("in database", justify="right")
    table.add_column("")
    ranked = sorted(expected, key=lambda k: (-expected[k], k))[:top]
    for name in ranked:
        stored = actual.get(name, 0)
        same = stored == expected[name]
        table.add_row(
            name, f"{expected[name]:,}", f"{stored:,}", "[green]✔[/]" if same else "[red]✘[/]"
        )
    return table
