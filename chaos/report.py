"""The soak's one verdict table, and the same facts as JSON for tools and tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from chaos.checks import examples
from chaos.faults import Injected
from chaos.outcome import STALL_LEAD_SECONDS, Outcome
from chaos.profile import Profile
from chaos.schedule import LASTING, FaultKind
from chaos.verify import EVERY_CONSUMER


def print_table(console: Console, outcome: Outcome) -> None:
    """Faults by kind, events, duplicates absorbed, longest stall, and the checks' results."""
    profile, workload = outcome.profile, outcome.workload
    table = Table(
        "", "",
        title=f"effectively-once chaos soak: profile {profile.name}, {outcome.backend}, "
        f"broker {outcome.broker}{_nodes(profile)}, "
        f"{profile.workers} workers, source: {outcome.source}",
        title_justify="left", show_header=False,
    )  # fmt: skip
    injected = outcome.injected()
    for kind in FaultKind:
        planned = outcome.planned.get(kind, 0)
        if not planned:
            continue
        faults = [f for f in outcome.ledger if f.kind == kind]
        text = f"{injected[kind]} of {planned} planned"
        if kind in LASTING:
            text += f", {sum(f.seconds for f in faults if not f.failed):.0f} s in all"
        failed = [f.failed for f in faults if f.failed]
        if failed:
            text += f" [red]({len(failed)} failed: {examples(failed)})[/]"
        table.add_row(f"fault: {kind.value}", text)
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(workload.poison_by_kind().items()))
    table.add_row(
        "events sent",
        f"{len(workload.records):,} records over {profile.shape.aggregates:,} aggregates: "
        f"{workload.distinct_events:,} events, {workload.duplicates:,} duplicate sends, "
        f"{workload.swapped:,} before their predecessor, {len(workload.poison):,} poison "
        f"({kinds}), {workload.spaced:,} aggregates (and their events' ids) another's with a "
        f"trailing space; {profile.rate:g}/s for {profile.window:.0f} s",
    )
    findings = outcome.findings
    if findings is not None:
        topic = findings.topic
        extra = topic.repeats - workload.duplicates
        table.add_row(
            "duplicates absorbed",
            _mark(findings.tally.ok)
            + f" {topic.repeats:,} repeated records on the topic ({workload.duplicates:,} "
            f"duplicate sends, {extra:,} more by the producer's retries)"
            + _worker_duplicates(outcome),
        )
    stall = outcome.stall
    around = "; ".join(f"{f.kind.value} at t={f.at:.0f} s" for f in outcome.around_stall())
    table.add_row(
        "max time without progress",
        f"{stall.seconds:.0f} s from t={stall.start:.0f} s"
        + (f" (struck up to {STALL_LEAD_SECONDS:g} s before: {around})" if around else ""),
    )
    beyond = outcome.stall_outside_outages
    table.add_row(
        "max time without progress, outages left out",
        f"{beyond.seconds:.0f} s from t={beyond.start:.0f} s (the seconds the database or the "
        "broker was unreachable do not count; a stretch counts again from the outage's end)",
    )
    hang = outcome.hang
    if hang is not None:
        table.add_row(
            "longest a worker finished no batch with records waiting",
            f"{hang.stall.seconds:.0f} s: {hang.slot} (start #{hang.start_number}) from "
            f"t={hang.stall.start:.0f} s",
        )
    table.add_row("caught up", _drain(outcome))
    table.add_row("worker exits not caused by the soak", _exits(outcome))
    if outcome.stopped:
        codes = ", ".join(
            f"{slot} {'ignored it' if code is None else code}"
            for slot, code in outcome.stopped.items()
        )
        clean = all(code == 0 for code in outcome.stopped.values())
        table.add_row("exit codes on SIGTERM at the end", _mark(clean) + " " + codes)
    if findings is not None:
        _add_findings(table, outcome)
    if outcome.failure:
        table.add_row("soak failed", f"[red]{outcome.failure}[/]")
    load = ", ".join(f"{value:.2f}" for value in outcome.load_average)
    during = ""
    if outcome.loads:
        mean = sum(outcome.loads) / len(outcome.loads)
        during = f"; 1-minute load {mean:.1f} on average, {max(outcome.loads):.1f} at most"
    table.add_row(
        "wall time, load average",
        f"{outcome.wall_seconds:.0f} s; {load} at the end{during} ({os.cpu_count()} cores)",
    )
    table.add_row(
        "final state",
        "[bold green]EXACT[/]" if outcome.exact else "[bold red]NOT EXACT[/]",
    )
    console.print(table)


def _add_findings(table: Table, outcome: Outcome) -> None:
    findings = outcome.findings
    assert findings is not None
    state = findings.state
    wrong: dict[str, int] = {}
    for mismatch in state.mismatches:
        wrong[mismatch.what] = wrong.get(mismatch.what, 0) + 1
    table.add_row(
        "balances, stock, counts",
        _mark(state.ok)
        + f" {state.balances:,} balances, {state.stock_levels:,} stock levels, notifications, "
        f"consumed events of {len(EVERY_CONSUMER)} consumers"
        + (f"; differ: {wrong}" if wrong else ""),
    )
    tally = findings.tally
    table.add_row(
        "each effect applied once",
        _mark(tally.ok)
        + f" {tally.once:,} of {tally.events:,} events once; {len(tally.repeated):,} more than "
        f"once; {tally.missing:,} never; {tally.strangers:,} unknown",
    )
    table.add_row("parked_event", _mark(findings.parked == 0) + f" {findings.parked:,} rows")
    others = findings.other_failures
    table.add_row(
        "failed_event besides poison",
        _mark(not others) + (f" {others}" if others else " none"),
    )
    outbox = findings.outbox
    table.add_row(
        "outbox (the workers' DLT records)",
        _mark(set(outbox) <= {"PUBLISHED"})
        + " "
        + (", ".join(f"{n:,} {status}" for status, n in sorted(outbox.items())) or "empty"),
    )
    dead = findings.dead_letters
    line = f" {dead.once:,} of {dead.poison:,} poison records on the DLT exactly once"
    if dead.missing:
        line += f"; missing: {examples(dead.missing)}"
    if dead.repeated:
        extra = sum(dead.repeated.values()) - len(dead.repeated)
        twice = len(dead.written_twice)
        relayed = len(dead.repeated) - twice
        line += (
            f"; {len(dead.repeated):,} repeated ({extra:,} extra copies: {twice:,} written to"
            f" the outbox twice, {relayed:,} written once and published again by a relay that"
            " lost its lease)"
        )
    line += f"; other records on the DLT: {len(dead.others):,}"
    if dead.others:
        line += f" ({examples(dead.others)})"
    table.add_row("DLT", _mark(dead.ok) + line)


def _nodes(profile: Profile) -> str:
    if profile.brokers == 1:
        return ""
    return (
        f" ({profile.brokers} nodes, replication factor {profile.replication_factor}, "
        f"min.insync.replicas {profile.min_insync_replicas})"
    )


def _worker_duplicates(outcome: Outcome) -> str:
    totals = outcome.worker_totals
    database, redis = totals["duplicates/database"], totals["duplicates/prefilter"]
    if not database and not redis:
        return ""
    return (
        f"; the workers caught at least {database + redis:,} duplicates, redeliveries "
        f"included ({database:,} by the database, {redis:,} by Redis)"
    )


def _drain(outcome: Outcome) -> str:
    if outcome.drain_seconds is not None:
        return f"[green]✔[/] {outcome.drain_seconds:.0f} s after the chaos window"
    pending = "" if outcome.pending_at_end is None else f": {outcome.pending_at_end:,} pending"
    return f"[red]✘[/] not within {outcome.profile.drain_timeout:.0f} s{pending}"


def _exits(outcome: Outcome) -> str:
    if not outcome.exits:
        return "[green]✔[/] none"
    codes = ", ".join(f"{e.slot} exit {e.code} at t={e.at:.0f} s" for e in outcome.exits)
    return f"[red]✘[/] {len(outcome.exits)}: {codes}"


def _mark(ok: bool) -> str:
    return "[green]✔[/]" if ok else "[red]✘[/]"


def to_json(outcome: Outcome) -> dict[str, Any]:
    """The outcome as plain data."""
    findings = outcome.findings
    data: dict[str, Any] = {
        "profile": outcome.profile.name,
        "backend": outcome.backend,
        "broker": outcome.broker,
        "brokers": outcome.profile.brokers,
        "replication_factor": outcome.profile.replication_factor,
        "source": outcome.source,
        "exact": outcome.exact,
        "failure": outcome.failure,
        "faults": {
            kind.value: {
                "planned": outcome.planned.get(kind, 0),
                "injected": outcome.injected()[kind],
                "failed": [f.failed for f in outcome.ledger if f.kind == kind and f.failed],
            }
            for kind in FaultKind
            if outcome.planned.get(kind)
        },
        "ledger": [_fault(f) for f in sorted(outcome.ledger, key=lambda f: f.at)],
        "events": {
            "records": len(outcome.workload.records),
            "distinct": outcome.workload.distinct_events,
            "duplicate_sends": outcome.workload.duplicates,
            "swapped": outcome.workload.swapped,
            "spaced_aggregates": outcome.workload.spaced,
            "poison": outcome.workload.poison_by_kind(),
            "producer_resends": outcome.resends,
        },
        "max_seconds_without_progress": round(outcome.stall.seconds, 1),
        "stall_from": round(outcome.stall.start, 1),
        "faults_around_stall": [_fault(f) for f in outcome.around_stall()],
        "max_seconds_without_progress_outside_outages": round(
            outcome.stall_outside_outages.seconds, 1
        ),
        "stall_outside_outages_from": round(outcome.stall_outside_outages.start, 1),
        "progress_samples": [[round(s.at, 1), s.done, s.pending] for s in outcome.samples],
        "worker_hang": None
        if outcome.hang is None
        else {
            "slot": outcome.hang.slot,
            "start_number": outcome.hang.start_number,
            "from": round(outcome.hang.stall.start, 1),
            "seconds": round(outcome.hang.stall.seconds, 1),
        },
        "drain_seconds": outcome.drain_seconds,
        "pending_at_end": outcome.pending_at_end,
        "worker_exits": [
            {"slot": e.slot, "at": round(e.at, 1), "code": e.code, "log_tail": e.log_tail}
            for e in outcome.exits
        ],
        "exit_codes_on_sigterm": outcome.stopped,
        "worker_totals": dict(outcome.worker_totals),
        "wall_seconds": round(outcome.wall_seconds, 1),
        "load_average": outcome.load_average,
        "load_mean": round(sum(outcome.loads) / len(outcome.loads), 2) if outcome.loads else None,
        "load_max": max(outcome.loads, default=None),
    }
    if findings is not None:
        data["checks"] = {
            "state_exact": findings.state.ok,
            "mismatches": [
                {"what": m.what, "key": m.key, "expected": m.expected, "actual": m.actual}
                for m in findings.state.mismatches[:50]
            ],
            "tally": {
                "events": findings.tally.events,
                "once": findings.tally.once,
                "repeated": len(findings.tally.repeated),
                "missing": findings.tally.missing,
                "strangers": findings.tally.strangers,
            },
            "parked": findings.parked,
            "failed_event": findings.failures,
            "outbox": findings.outbox,
            "dlt": {
                "poison": findings.dead_letters.poison,
                "once": findings.dead_letters.once,
                "missing": findings.dead_letters.missing,
                "repeated": findings.dead_letters.repeated,
                "others": findings.dead_letters.others,
                "written_twice": findings.dead_letters.written_twice,
                "copies_at": findings.dead_letters.copies_at,
            },
            "topic": {
                "records": findings.topic.records,
                "events": findings.topic.events,
                "repeats": findings.topic.repeats,
                "poison": findings.topic.poison,
            },
        }
    return data


def _fault(fault: Injected) -> dict[str, Any]:
    return {
        "kind": fault.kind.value,
        "at": round(fault.at, 1),
        "seconds": round(fault.seconds, 1),
        "detail": fault.detail,
        "failed": fault.failed,
    }


def write_json(path: Path, outcome: Outcome) -> None:
    """Write ``to_json(outcome)`` to ``path``."""
    path.write_text(json.dumps(to_json(outcome), indent=2) + "\n", encoding="utf-8")
