"""Print the rows as one rich table, followed by how each column was measured."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from bench.results import METHOD, Row

DASH = "—"
# Worker, PostgreSQL, broker and bench keep about one runnable process per CPU on their own.
BUSY_LOAD_PER_CPU = 1.5


def print_table(console: Console, rows: list[Row], title: str) -> None:
    """The result table, then a line per row that is not correct, then the method."""
    table = Table(title=title, title_justify="left")
    table.add_column("scenario")
    headers = (
        "events",
        "events/s",
        "x bare",
        "p50 ms",
        "p99 ms",
        "tx / 1k ev",
        "CPU ms / 1k ev",
        "RSS MB",
        "steal %",
    )
    for header in headers:
        table.add_column(header, justify="right")
    table.add_column("correct")
    for row in rows:
        table.add_row(
            row.label,
            f"{row.events:,}",
            f"{row.events_per_s:,.0f}",
            _num(row.ratio_to_bare, "{:.2f}"),
            _num(row.p50_ms, "{:,.0f}"),
            _num(row.p99_ms, "{:,.0f}"),
            _num(row.tx_per_1k, "{:,.1f}"),
            _cpu(row),
            _num(row.peak_rss_mb, "{:,.0f}"),
            _num(row.steal_percent, "{:.0f}"),
            "[green]yes[/]" if row.correct else "[bold red]NO[/]",
        )
    console.print(table)
    for row in rows:
        if not row.correct:
            console.print(f"[bold red]✘ {row.label}:[/] {row.detail}")
    busiest = max((r.load_average or 0.0 for r in rows), default=0.0)
    cpus = os.cpu_count() or 1
    if busiest > cpus * BUSY_LOAD_PER_CPU:
        console.print(
            f"[yellow]the machine was busy: 1-minute load average up to {busiest:.1f} on "
            f"{cpus} CPUs during a measurement, more than the bench's own processes make; "
            "these figures are pessimistic[/]"
        )
    versions = {r.code for r in rows if r.code is not None}
    if len(versions) > 1:
        console.print(
            f"[bold yellow]the framework's source changed during the run ({len(versions)} "
            "versions, see each row's 'code' in the JSON): rows of different code are not "
            "comparable[/]"
        )
    latency = next((r for r in rows if r.latency_rate is not None), None)
    if latency is not None:
        console.print(
            "[dim]p50/p99: at an offered load of half the row's events/s "
            f"(e.g. {latency.latency_rate:,.0f} events/s for {latency.label})[/]"
        )
    for column, how in METHOD.items():
        console.print(f"[dim]{column}: {how}[/]")


def _cpu(row: Row) -> str:
    """The worker's (or relay's) CPU and its database backends', per 1,000 events."""
    own = (
        row.worker_cpu_ms_per_1k
        if row.worker_cpu_ms_per_1k is not None
        else row.relay_cpu_ms_per_1k
    )
    if own is None or row.database_cpu_ms_per_1k is None:
        return DASH
    return f"{own:,.0f} + {row.database_cpu_ms_per_1k:,.0f} db"


def _num(value: float | None, fmt: str) -> str:
    return DASH if value is None else fmt.format(value)
