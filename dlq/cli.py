"""``python -m dlq``: list, show, replay and skip the records of a dead-letter topic, and
release an aggregate's parked events from versions that never came.

Settings come from the environment, as for a worker: ``BROKER_URL`` (with the
broker security settings), ``DATABASE_URL`` and ``ORDER_TOPIC`` (``--topic`` names
another base topic). ``replay`` and ``skip`` only print what they would do unless
given ``--execute``. Exit codes: 0 done, 1 nothing matched, 2 a usage error, an
unreachable broker or database (or one that refused the connection settings), or a
record that could not be acted on.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import os
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError

from app.cli_run import error_console, labelled, output_console, run
from app.errors import ConfigurationError
from app.kafka_clients import KafkaClients
from app.settings import Settings, describe
from dlq import render
from dlq.actions import Action
from dlq.commands import Decision, Target, act, list_entries, one_entry
from dlq.dead import FailureStatus
from dlq.errors import CommandError, NothingMatched
from dlq.gaps import Release, release, unnamed_release
from dlq.policy import DeadReason
from dlq.selection import Selection, parse_moment, parse_position
from dlq.topics import DLT_SUFFIX, dlt_topic

T = TypeVar("T")
# ``release`` reads no dead-letter topic: its target's bound on that read goes unused.
RELEASE_TIMEOUT_SECONDS = 60.0

cli = typer.Typer(
    help="Inspect the dead-letter topic and bring its records back (replay) or give up on "
    "them (skip); give up the versions that never came before an aggregate's parked events "
    "(release).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = output_console()
err = error_console()


def _positions(values: list[str] | None) -> list[str]:
    for value in values or []:
        try:
            parse_position(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return values or []


def _moment(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_moment(value, datetime.now(UTC))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


Positions = Annotated[
    list[str] | None,
    typer.Argument(
        help="DLT records as <partition>:<offset>, or outbox:<id> for one that never reached "
        "its topic (the DLT column of list).",
        callback=_positions,
        show_default=False,
    ),
]
Topic = Annotated[
    str | None,
    typer.Option(help="Base topic whose dead-letter topic to use (default: $ORDER_TOPIC)."),
]
EventId = Annotated[str | None, typer.Option("--event-id", help="Only this eventId.")]
Consumer = Annotated[
    str | None,
    typer.Option(
        help="Only records dead for this consumer (its name, as in @handler(consumer=...)); "
        "poison records are nobody's and are left out."
    ),
]
Reason = Annotated[DeadReason | None, typer.Option(help="Only this dlt-reason.")]
Since = Annotated[
    str | None,
    typer.Option(
        help="Last failure at or after: ISO-8601 (naive = UTC) or an age (30m, 2h, 1d).",
        callback=_moment,
    ),
]
Until = Annotated[
    str | None,
    typer.Option(help="Last failure at or before (same forms as --since).", callback=_moment),
]
Status = Annotated[
    list[FailureStatus] | None, typer.Option(help="Only records in this status (repeatable).")
]
Limit = Annotated[int | None, typer.Option(min=1, help="At most this many (oldest first).")]
Timeout = Annotated[
    float, typer.Option(min=1, help="Give up reading the dead-letter topic after these seconds.")
]
Execute = Annotated[
    bool, typer.Option("--execute", help="Do it: publish the records (default: a dry run).")
]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help=(
            "Also act on resolved, skipped and retrying records, and skip for a consumer "
            "this database never saw."
        ),
    ),
]
Everything = Annotated[
    bool, typer.Option("--all", help="Allow --execute on every record of the dead-letter topic.")
]
Rate = Annotated[float | None, typer.Option(min=0.01, help="At most this many records/s.")]
By = Annotated[str | None, typer.Option(help="Who decides (default: $USER).")]
Why = Annotated[
    str | None, typer.Option("--why", "--reason-note", help="Why (kept as decision_note).")
]
ReleaseWhy = Annotated[
    str | None, typer.Option("--why", help="Why (in each skip record's data, with who).")
]
ForConsumer = Annotated[
    list[str] | None,
    typer.Option(
        "--for-consumer",
        help="Poison only (it is no consumer's): replay or skip it for this consumer "
        "(repeatable). Skipped, the consumer takes its version and its parked successors "
        "apply. A record dead for a consumer is always acted on for that one.",
        show_default=False,
    ),
]


@cli.command("list")
def list_(
    topic: Topic = None,
    event_id: EventId = None,
    consumer: Consumer = None,
    reason: Reason = None,
    since: Since = None,
    until: Until = None,
    status: Status = None,
    limit: Limit = None,
    timeout: Timeout = 60.0,
    json: Annotated[bool, typer.Option("--json", help="JSON rows instead of a table.")] = False,
) -> None:
    """List the dead-letter records with their status, oldest failure first."""
    selection = _selection(None, event_id, consumer, reason, since, until, status, limit)
    target = _target(topic, timeout)
    entries, notes = _run(list_entries(target, selection), json)
    for line in notes:
        err.print(line)
    if json:
        typer.echo(render.rows_json(entries))
    else:
        out.print(render.table(entries, title=f"{target.dlt}: {len(entries)} record(s)"))
        for note in render.notes(entries):
            out.print(note)


@cli.command()
def show(
    position: Annotated[
        str | None,
        typer.Argument(help="<partition>:<offset> in the DLT, or outbox:<id>.", show_default=False),
    ] = None,
    event_id: EventId = None,
    consumer: Consumer = None,
    topic: Topic = None,
    timeout: Timeout = 60.0,
) -> None:
    """Show one record in full: status, every header, key and payload."""
    if (position is None) == (event_id is None):
        raise typer.BadParameter("name the record by <partition>:<offset> or by --event-id")
    where = parse_position(_positions([position])[0]) if position else None
    entry = _run(one_entry(_target(topic, timeout), where, event_id, consumer))
    out.print(render.show(entry))


def _decide(action: Action, summary: str) -> Callable[..., None]:
    """The ``replay`` or ``skip`` command: one set of options, two actions."""

    def command(
        positions: Positions = None,
        event_id: EventId = None,
        consumer: Consumer = None,
        reason: Reason = None,
        since: Since = None,
        until: Until = None,
        status: Status = None,
        limit: Limit = None,
        execute: Execute = False,
        force: Force = False,
        everything: Everything = False,
        rate: Rate = None,
        by: By = None,
        why: Why = None,
        for_consumer: ForConsumer = None,
        topic: Topic = None,
        timeout: Timeout = 60.0,
    ) -> None:
        selection = _selection(positions, event_id, consumer, reason, since, until, status, limit)
        decision = Decision(
            action, execute, force, everything, rate, _by(by), why, tuple(for_consumer or ())
        )
        raise typer.Exit(_run(act(_target(topic, timeout), selection, decision, out)))

    command.__doc__ = summary
    return command


replay = cli.command("replay")(
    _decide(
        Action.REPLAY,
        "Publish dead records back to their original topic, for the consumer that failed them.",
    )
)
skip = cli.command("skip")(
    _decide(
        Action.SKIP,
        "Give up on dead events: their consumer takes the version without running the handler."
        "\n\nThe aggregate's later events, parked behind the dead one, then apply. Poison whose"
        " envelope could be read blocks its aggregate for every consumer: skip it for each with"
        " --for-consumer.",
    )
)


@cli.command("release")
def release_(
    consumer: Annotated[
        str, typer.Option(help="The consumer whose parked events wait.", show_default=False)
    ],
    aggregate: Annotated[
        str,
        typer.Option(help="The aggregate, as <aggregateType>:<aggregateId>.", show_default=False),
    ],
    execute: Execute = False,
    by: By = None,
    why: ReleaseWhy = None,
) -> None:
    """Give up the versions a consumer's parked events wait for, which never came.

    Each missing version goes as a skip record to the parked events' partition: the
    consumer takes it without running a handler, and its parked events then apply in
    order; each says who gave it up and why (its data's givenUpBy and why). Without
    --execute, only says which versions it would give up."""
    agg_type, colon, agg_id = aggregate.partition(":")
    if not (colon and agg_type and agg_id):
        raise typer.BadParameter("name the aggregate as <aggregateType>:<aggregateId>")
    target = _target(None, RELEASE_TIMEOUT_SECONDS)
    if execute and target.app_id is None:
        err.print(unnamed_release(consumer))
    decision = Release(_by(by), why)
    _run(release(target, consumer, (agg_type, agg_id), execute, out, decision))


def _selection(
    positions: list[str] | None,
    event_id: str | None,
    consumer: str | None,
    reason: DeadReason | None,
    since: str | None,
    until: str | None,
    statuses: list[FailureStatus] | None,
    limit: int | None,
) -> Selection:
    now = datetime.now(UTC)
    start = parse_moment(since, now) if since else None
    end = parse_moment(until, now) if until else None
    if start is not None and end is not None and start > end:
        raise typer.BadParameter(
            "--since is later than --until: no record can match (--since 2h --until 1h is "
            "the hour before the last)"
        )
    return Selection(
        positions=frozenset(parse_position(p) for p in positions or []),
        event_id=event_id,
        consumer=consumer,
        reason=reason.value if reason else None,
        since=start,
        until=end,
        statuses=frozenset(status.value for status in statuses or []),
        limit=limit,
    )


def _target(topic: str | None, timeout: float) -> Target:
    try:
        settings = Settings()
    except ValidationError as exc:
        _fail(CommandError(f"bad settings in the environment: {'; '.join(describe(exc))}"))
    try:
        clients = KafkaClients.from_settings(settings)
    except ConfigurationError as exc:
        _fail(CommandError(str(exc)))
    base = topic or settings.order_topic
    dlt = base if base.endswith(DLT_SUFFIX) else dlt_topic(base)
    # APP_ID set: that service's records; not set: every service's (one at a time).
    app_id = settings.app_id if "app_id" in settings.model_fields_set else None
    return Target(clients, settings.database_url, dlt, timeout, app_id)


def _by(by: str | None) -> str:
    if by:
        return by
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def _run(work: Coroutine[Any, Any, T], json: bool = False) -> T:
    try:
        return asyncio.run(work)
    except NothingMatched as exc:
        if json:
            typer.echo("[]")  # still a JSON document for whoever parses stdout
        _fail(exc)
    except CommandError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None


def _fail(exc: CommandError) -> NoReturn:
    err.print(labelled("error:", exc, "red") if exc.exit_code > 1 else str(exc))
    raise typer.Exit(exc.exit_code)


@cli.callback()
def _quiet_kafka_client() -> None:
    # aiokafka logs connection failures itself; the command says it once, in its own words.
    logging.getLogger("aiokafka").addHandler(logging.NullHandler())
    logging.getLogger("aiokafka").propagate = False


def register(parent: typer.Typer) -> None:
    """Add these commands to ``parent`` as its ``dlq`` group (``effectively-once dlq``)."""
    parent.add_typer(cli, name="dlq")


def main() -> None:
    """Entry point of ``python -m dlq``."""
    run(cli, "python -m dlq")
