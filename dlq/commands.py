"""What ``list``, ``show``, ``replay`` and ``skip`` do, once their arguments are parsed.

Each reads the dead-letter topic first (an unreachable broker is said before
anything else), then the database: the records the relay gave up on, which no
topic holds (``dlq.unpublished``), and the ``failed_event`` rows of the records
it selected.
"""

from __future__ import annotations

import asyncio
import difflib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiokafka.errors import KafkaError, TopicAuthorizationFailedError
from rich.console import Console

from app.cli_run import labelled
from app.kafka_clients import KafkaClients
from app.records import RawRecord
from dlq import render
from dlq.actions import Action, Executor, Plan, Report, Summary, plan, settle
from dlq.broker import read_at, read_topic, replayer
from dlq.dead import SETTLED, UNPUBLISHED_PARTITION, DeadLetter, position_text
from dlq.errors import CommandError, NothingMatched
from dlq.selection import Entry, Selection, finish, prefilter, split_copies
from dlq.status import FailureStore, failure_store


@dataclass(frozen=True, slots=True)
class Target:
    """Where the command reads and writes."""

    clients: KafkaClients
    database_url: str
    dlt: str
    timeout: float
    # Whose records it acts on (``APP_ID`` when set); None: every deployment's, but a
    # replay or skip only of one deployment's at a time (``one_deployment``).
    app_id: str | None = None

    def ours(self, dead: DeadLetter) -> bool:
        """Whether ``dead`` is this deployment's (or was written before records said)."""
        return self.app_id is None or dead.app_id in (None, self.app_id)


def mixed(entries: Sequence[Entry]) -> str:
    """``records of several deployments (APP_ID a, b): ...`` when ``entries`` (read
    without ``APP_ID``) hold them: their statuses come from one database."""
    apps = sorted({entry.dead.app_id for entry in entries if entry.dead.app_id})
    if len(apps) < 2:
        return ""
    return (
        f"records of several deployments (APP_ID {', '.join(apps)}): each status comes "
        "from DATABASE_URL, one deployment's database; set APP_ID to the service's"
    )


def one_deployment(entries: Sequence[Entry]) -> None:
    """Refuse to act on the records of several deployments at once (the command not told
    its ``APP_ID``): services reading one topic decide on their own failures."""
    counted = Counter(entry.dead.app_id for entry in entries if entry.dead.app_id)
    if len(counted) > 1:
        raise CommandError(
            f"the selection holds records of several deployments (APP_ID {_each(counted)}): "
            "set APP_ID to the service's to act on its records alone"
        )


def _each(counted: Counter[str]) -> str:
    """``a: 3, b: 1``: how many records of each deployment, by name."""
    return ", ".join(f"{app}: {n}" for app, n in sorted(counted.items()))


@dataclass(frozen=True, slots=True)
class Decision:
    """How ``replay`` / ``skip`` act on their selection."""

    action: Action
    execute: bool
    force: bool
    everything: bool
    rate: float | None
    by: str
    note: str | None
    for_consumers: tuple[str, ...] = ()


async def list_entries(target: Target, selection: Selection) -> tuple[list[Entry], list[str]]:
    """The selected records with their status (``list``), and the lines to say about other
    deployments' records (left out, or shown with statuses of another database)."""
    on_topic = await _read_topic(target)
    async with failure_store(target.database_url) as store:
        dead, left_out = await _read(store, on_topic, selection, target)
        entries = await _join(store, dead, selection, target)
    return entries, [note for note in (left_out, mixed(entries)) if note]


async def one_entry(
    target: Target, position: tuple[int, int] | None, event_id: str | None, consumer: str | None
) -> Entry:
    """The one record ``show`` names, by DLT position (or ``outbox:<id>``) or by event id
    (and consumer): of several copies of one failure, the newest."""
    on_topic: tuple[list[RawRecord], NothingMatched | None] = ([], None)
    dead: list[DeadLetter] | None = None
    if position is None:
        selection = Selection(event_id=event_id, consumer=consumer)
        on_topic = await _read_topic(target)
    elif position[0] == UNPUBLISHED_PARTITION:
        selection = Selection(positions=frozenset([position]))
    else:
        partition, offset = position
        async with _reading(target):
            record = await read_at(target.clients, target.dlt, partition, offset)
        if record is None:
            raise NothingMatched(f"no record at {partition}:{offset} in {target.dlt}")
        selection, dead = Selection(), [DeadLetter.of(record)]
    async with failure_store(target.database_url) as store:
        if dead is None:
            try:
                dead, _ = await _read(store, on_topic, selection, target)
            except NothingMatched:
                if position is None:
                    raise
                raise NothingMatched(
                    f"no failure record at {position_text(*position)}: none of the records "
                    "the relay gave up on has that outbox id (python -m dlq list shows them)"
                ) from None
        newest, _ = split_copies(await _join(store, dead, selection, target))
    if len(newest) > 1:
        where = ", ".join(entry.dead.position for entry in newest)
        raise CommandError(
            f"{len(newest)} records match ({where}); name one by position or add --consumer"
        )
    return newest[0]


async def act(target: Target, selection: Selection, decision: Decision, out: Console) -> int:
    """``replay`` / ``skip``: print the plan; with ``--execute`` carry it out. The exit code."""
    if decision.execute and not (selection.narrows or decision.everything):
        raise CommandError(
            f"--execute without a selection would {decision.action} all of {target.dlt}: "
            "name records or filters, or add --all"
        )
    on_topic = await _read_topic(target)
    async with failure_store(target.database_url) as store:
        unknown = await store.unknown_consumers(decision.for_consumers)
        if unknown and not decision.force:
            names = ", ".join(repr(name) for name in unknown)
            raise CommandError(
                f"--for-consumer {names}: no consumer of that name ever took a version, "
                "applied or failed an event in this database (mistyped?); --force skips for "
                "it all the same"
            )
        dead, _ = await _read(store, on_topic, selection, target)
        selected = await _join(store, dead, selection, target)
        one_deployment(selected)
        todo = plan(selected, decision.action, decision.force, decision.for_consumers)
        _explain(todo, decision, target, out)
        wanted = len(todo.act) + len(todo.settle)
        if not decision.execute:
            if wanted:
                out.print(
                    f"dry run: would {decision.action} {wanted} of {todo.selected} selected, "
                    f"{_left_alone(todo)}; nothing published (add --execute)"
                )
            else:
                out.print(
                    f"dry run: nothing to {decision.action} of {todo.selected} selected, "
                    f"{_left_alone(todo)}"
                )
            return 2 if _refused_only(todo) else 0
        summary = Summary()
        if todo.settle:
            summary = await settle(
                todo.settle, store, decision.by, decision.note, _settled_reporter(out)
            )
        if todo.act:
            async with replayer(target.clients) as sender:
                executor = Executor(
                    decision.action,
                    sender,
                    store,
                    decision.by,
                    decision.note,
                    decision.rate,
                    app_id=target.app_id,
                )
                published = await executor.run(todo.act, _reporter(decision.action, out))
            summary.done += published.done
            summary.errors += published.errors
    out.print(
        f"selected {todo.selected}: {decision.action.past} {len(summary.done)}, "
        f"{_left_alone(todo)}, errors {len(summary.errors)}"
    )
    return 2 if summary.errors or _refused_only(todo) else 0


def _refused_only(todo: Plan) -> bool:
    """Only refusals (skip of poison): the operator's request could not be done at all."""
    return bool(todo.refused) and not (todo.act or todo.left_alone or todo.older_copies)


async def _read_topic(target: Target) -> tuple[list[RawRecord], NothingMatched | None]:
    """The DLT's records; none, and why, when it does not exist (yet the database may hold
    records that never reached it)."""
    try:
        async with _reading(target):
            return await read_topic(target.clients, target.dlt), None
    except NothingMatched as missing:
        return [], missing


async def _read(
    store: FailureStore,
    on_topic: tuple[list[RawRecord], NothingMatched | None],
    selection: Selection,
    target: Target,
) -> tuple[list[DeadLetter], str]:
    """The records of the DLT and those that never reached it, through ``selection``'s
    header filters, and what of other deployments' records was left out (``others``)."""
    records, missing = on_topic
    letters = [*map(DeadLetter.of, records), *await store.unpublished(target.dlt)]
    found = [dead for dead in letters if target.ours(dead)]
    dead = prefilter(found, selection)
    left_out = others(target, letters)
    if not dead:
        if missing is not None and not letters:
            raise missing
        said = _nothing(target, selection, len(found), bool(left_out)) + _nearest(
            selection.consumer, {d.consumer for d in found if d.consumer}
        )
        raise NothingMatched(f"{said}; {left_out}" if left_out else said)
    return dead, left_out


def others(target: Target, letters: Sequence[DeadLetter]) -> str:
    """``left out, N record(s) of other deployments (APP_ID a: 3, b: 1), ...``, or ``""``:
    services reading one topic share its DLT, and each acts on its own records only."""
    counted = Counter(dead.app_id or "" for dead in letters if not target.ours(dead))
    if not counted:
        return ""
    return (
        f"left out, {counted.total()} record(s) of other deployments (APP_ID "
        f"{_each(counted)}), "
        f"this one being APP_ID {target.app_id}"
    )


async def _join(
    store: FailureStore, dead: Sequence[DeadLetter], selection: Selection, target: Target
) -> list[Entry]:
    states = await store.states(d.failure_key for d in dead if d.failure_key is not None)
    entries = finish(dead, states, selection, await store.still_waiting(dead, states))
    if not entries:
        raise NothingMatched(_nothing(target, selection, len(dead)))
    return entries


@asynccontextmanager
async def _reading(target: Target) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(target.timeout):
            yield
    except TimeoutError:
        raise CommandError(
            f"reading {target.dlt} did not reach its end within {target.timeout:g} s; "
            "raise --timeout"
        ) from None
    except TopicAuthorizationFailedError:
        raise CommandError(
            f"the broker refused to let this login read {target.dlt}: grant it Read and "
            "Describe on the topic (it reads with no consumer group)"
        ) from None
    except KafkaError as exc:  # connected, then the broker went away or refused
        raise CommandError(f"reading {target.dlt} failed: {type(exc).__name__}: {exc}") from None


def _nearest(consumer: str | None, named: set[str]) -> str:
    """`` (did you mean 'x'?)`` for a ``--consumer`` close to one the records name."""
    if consumer is None or consumer in named:
        return ""
    close = difflib.get_close_matches(consumer, sorted(named), n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _nothing(target: Target, selection: Selection, read: int, others_too: bool = False) -> str:
    if not read and others_too:
        return f"{target.dlt} holds no record of APP_ID {target.app_id}"
    if not read:
        return f"{target.dlt} is empty"
    return f"no record of {target.dlt} matches {selection.describe()} ({read} read)"


def _explain(todo: Plan, decision: Decision, target: Target, out: Console) -> None:
    verb = decision.action.value
    if todo.act:
        title = f"to {verb}: {len(todo.act)} of {todo.selected} selected in {target.dlt}"
        out.print(render.table(todo.act, title=title))
    for entry in todo.left_alone:
        out.print(f"left alone {entry.dead.position}: {entry.status} (--force to {verb} it)")
    for entry in todo.older_copies:
        out.print(f"left alone {entry.dead.position}: an older copy of a record selected too")
    for entry in todo.refused:
        dead = entry.dead
        why = "is no consumer's; name each consumer to skip it for with --for-consumer"
        out.print(f"refused {dead.position}: poison ({dead.reason}) {why}")
    for entry in todo.settle:
        dead = entry.dead
        out.print(
            f"to skip {dead.position}: poison ({dead.reason}) with no readable envelope: "
            "nothing to deliver, no version held back; its row is marked skipped"
        )
    if decision.action is Action.SKIP:
        for entry in todo.act:
            dead = entry.dead
            if dead.skipped_by_version:
                out.print(
                    f"note {dead.position}: poison ({dead.reason}) with no readable envelope, "
                    f"holding version {dead.aggregate_version} of {dead.aggregate_type}:"
                    f"{dead.aggregate_id}: a skip record of that version goes to "
                    f"{entry.consumer} (as release publishes)"
                )
    if decision.action is Action.REPLAY:
        for entry in todo.act:
            dead = entry.dead
            if dead.is_poison and not dead.has_envelope:
                out.print(
                    f"note {dead.position}: poison ({dead.reason}) with no readable envelope: "
                    "the replay dead-letters it again unless a deployment reads it now; "
                    "skip settles it"
                )


def _reporter(action: Action, out: Console) -> Report:
    def report(entry: Entry, sent: tuple[int, int] | None, error: str | None) -> None:
        dead = entry.dead
        who = f"{dead.event_id or 'poison'} for {entry.consumer or 'every consumer'}"
        if sent is None:
            out.print(labelled("error", f"{dead.position} ({who}): {error}", "red"))
        else:
            where = f"{dead.original_topic}[{sent[0]}]@{sent[1]}"
            status = entry.state.status
            after = (
                f" ({status} already, --force: a duplicate for its consumer, which took the "
                "event; the row keeps its decision)"
                if status in SETTLED and not (dead.is_poison and action is Action.SKIP)
                else ""
            )
            out.print(f"{action.past} {dead.position} ({who}) -> {where}{after}")

    return report


def _settled_reporter(out: Console) -> Report:
    def report(entry: Entry, sent: tuple[int, int] | None, error: str | None) -> None:
        position = entry.dead.position
        if error is not None:
            out.print(labelled("error", f"{position} (poison): {error}", "red"))
        else:
            out.print(f"skipped {position} (poison): nothing published, its row marked skipped")

    return report


def _left_alone(todo: Plan) -> str:
    """``left alone 3 (resolved 2, older copy 1)``."""
    why: dict[str, int] = {}
    for entry in todo.left_alone:
        why[entry.status] = why.get(entry.status, 0) + 1
    if todo.older_copies:
        why["older copy"] = len(todo.older_copies)
    if todo.refused:
        why["poison"] = len(todo.refused)
    count = sum(why.values())
    detail = ", ".join(f"{name} {n}" for name, n in why.items())
    return f"left alone {count}" + (f" ({detail})" if detail else "")
