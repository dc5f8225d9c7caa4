"""How the DLQ command shows records: a rich table, JSON rows, one record in full. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from rich import box
from rich.console import Group, RenderableType
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from dlq.dead import DeadLetter, FailureStatus, Unpublished, event_text
from dlq.selection import Entry, split_copies
from dlq.trip import iso
from dlq.unpublished import advice

_STATUS_STYLE: dict[str, str] = {
    FailureStatus.DEAD: "bold red",
    FailureStatus.RETRYING: "cyan",
    FailureStatus.REPLAYED: "yellow",
    FailureStatus.SKIP_REQUESTED: "yellow",
    FailureStatus.RESOLVED: "green",
    FailureStatus.SKIPPED: "green",
    FailureStatus.UNKNOWN: "dim",
    FailureStatus.UNPUBLISHED: "bold red",
}


def when(moment: datetime | None) -> str:
    """``2024-05-01 10:00:03`` (UTC, to the second), or ``-``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def aggregate(dead: DeadLetter) -> str:
    """``type:id@version``, as ``release --aggregate`` takes it (``type:id`` if unversioned,
    ``id`` without a type, ``-`` if unknown, as for poison)."""
    if dead.aggregate_id is None:
        return "-"
    return event_text(dead.aggregate_type, dead.aggregate_id, dead.aggregate_version)


def table(entries: Sequence[Entry], title: str | None = None) -> Table:
    """One row per record, named by its DLT ``partition:offset`` (what ``show`` takes), or
    ``outbox:<id>`` for one that never reached its topic (``notes`` says why).

    A plan that acts on poison for named consumers (``--for-consumer``) has one row per
    record and consumer: a ``for`` column names the consumer each row is for. Records of
    several deployments (read without ``APP_ID``) get an ``APP_ID`` column.
    """
    grid = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
    targeted = any(entry.target is not None for entry in entries)
    # Several services' records (the command not told its APP_ID): whose each one is.
    deployments = len({entry.dead.app_id for entry in entries}) > 1
    names = (
        "DLT",
        "event id",
        "type",
        "aggregate",
        *(("APP_ID",) if deployments else ()),
        "consumer",
        *(("for",) if targeted else ()),
    )
    for name in (*names, "reason"):
        # The long ids fold when the terminal is narrow; the short columns stay whole.
        grid.add_column(name, overflow="fold", no_wrap=name not in ("event id", "aggregate"))
    grid.add_column("tries", justify="right", no_wrap=True)
    grid.add_column("last failure (UTC)", no_wrap=True)
    grid.add_column("status", no_wrap=True)
    older = _older(entries)
    for entry in entries:
        dead = entry.dead
        status = Text(entry.status, style=_STATUS_STYLE.get(entry.status, ""))
        if id(entry) in older:
            status.append(" (older copy)", style="dim")
        if entry.waiting:
            status.append(f" (skipped for some; {', '.join(entry.waiting)} wait)", style="dim")
        grid.add_row(
            dead.position,
            dead.event_id or "-",
            dead.event_type or "-",
            aggregate(dead),
            *((dead.app_id or "-",) if deployments else ()),
            dead.consumer or "(poison)",
            *((entry.consumer or "-",) if targeted else ()),
            dead.reason or "-",
            "-" if dead.attempts is None else str(dead.attempts),
            when(dead.last_failure_at),
            status,
        )
    return grid


def notes(entries: Sequence[Entry]) -> list[Text]:
    """A line for each record that never reached its topic: why, and what to do."""
    return [
        Text(
            f"{entry.dead.position} ({entry.dead.event_id or 'poison'} for "
            f"{entry.dead.consumer or 'every consumer'}) {unpublished_line(where)}"
        )
        for entry in entries
        if (where := entry.dead.unpublished) is not None
    ]


def unpublished_line(where: Unpublished) -> str:
    """``never reached <topic> (the relay gave up after N attempts: <last error>); <what
    to do>``."""
    return (
        f"never reached {where.topic} (the relay gave up after {where.attempts} attempts: "
        f"{where.last_error}); {advice(where)}"
    )


def row(entry: Entry, older_copy: bool = False) -> dict[str, Any]:
    """A record as a flat JSON object (``list --json``): every dead-letter header, parsed.

    ``older_copy``: a newer DLT record of the same failure exists (it died again after a
    replay); ``replay`` and ``skip`` act on the newest copy only.
    """
    dead = entry.dead
    first, last = dead.first_failure_at, dead.last_failure_at
    where = dead.unpublished
    on_topic = where is None
    return {
        "position": dead.position,
        "dlt_topic": dead.record.topic,
        "dlt_partition": dead.record.partition if on_topic else None,
        "dlt_offset": dead.record.offset if on_topic else None,
        "original_topic": dead.original_topic or None,
        "original_partition": dead.original_partition,
        "original_offset": dead.original_offset,
        "consumer": dead.consumer,
        "reason": dead.reason or None,
        "exception_type": dead.exception_type or None,
        "exception_message": dead.exception_message or None,
        "attempts": dead.attempts,
        "first_failure_at": iso(first) if first else None,
        "last_failure_at": iso(last) if last else None,
        "event_id": dead.event_id,
        "event_type": dead.event_type,
        "aggregate_type": dead.aggregate_type,
        "aggregate_id": dead.aggregate_id,
        "aggregate_version": dead.aggregate_version,
        "replay_count": dead.replay_count,
        "status": entry.status,
        "decided_by": entry.state.decided_by,
        "decision_note": entry.state.decision_note,
        "older_copy": older_copy,
        "waiting": list(entry.waiting),
        "app_id": dead.app_id,
        "unpublished": None if where is None else _unpublished(where),
    }


def _unpublished(where: Unpublished) -> dict[str, Any]:
    return {
        "outbox_id": where.outbox_id,
        "topic": where.topic,
        "kind": where.kind,
        "attempts": where.attempts,
        "last_error": where.last_error,
        "since": iso(where.since) if where.since else None,
        "advice": advice(where),
    }


def rows_json(entries: Sequence[Entry]) -> str:
    """``list --json``: an array of ``row``s, indented."""
    older = _older(entries)
    rows = [row(entry, id(entry) in older) for entry in entries]
    return orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode()


def _older(entries: Sequence[Entry]) -> set[int]:
    return {id(entry) for entry in split_copies(entries)[1]}


def show(entry: Entry) -> RenderableType:
    """One record in full: where it is, its status, every header, its key and payload."""
    record = entry.dead.record
    headers = Table(show_header=False, box=None, padding=(0, 1))
    headers.add_column(style="bold", no_wrap=True)
    headers.add_column(overflow="fold")
    for name, value in record.headers:
        headers.add_row(name, readable(value))
    status = entry.status
    decision = [part for part in (entry.state.decided_by, entry.state.decision_note) if part]
    where = entry.dead.unpublished
    return Group(
        Text(f"{record.topic} {entry.dead.position}  key {readable(record.key)}", style="bold"),
        Text.assemble(
            "status ",
            (status, _STATUS_STYLE.get(status, "")),
            f"  ({', '.join(decision)})" if decision else "",
            f"  {unpublished_line(where)}" if where is not None else "",
        ),
        Text("headers", style="bold underline"),
        headers,
        Text("payload", style="bold underline"),
        payload(record.value),
    )


def readable(value: bytes | None) -> str:
    """UTF-8 text as it is, other bytes as their ``repr``."""
    if value is None:
        return "(none)"
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return repr(value)


def payload(value: bytes | None) -> RenderableType:
    """Pretty JSON when the value is JSON, else the ``repr`` of its bytes."""
    if value is None:
        return Text("(none)")
    try:
        orjson.loads(value)
    except orjson.JSONDecodeError:
        return Text(repr(value))
    return JSON(value.decode("utf-8"))
