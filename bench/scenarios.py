"""The throughput scenarios: the bare agent, the framework, and the redelivery storms.

Each consumes the whole main topic from its start with a consumer group of
its own, except the same-group storm. The framework scenarios start from
emptied tables; the storms run on what the scenario before them left, so that
every event is one the consumers already applied, and they must leave it
exactly as it was.

The Redis prefilter namespaces its keys by ``APP_ID`` and remembers only
events a transaction applied. So it can only know the events of a storm when
the storm's group is the group that applied them with Redis on: ``three-redis``
applies the topic with Redis on, and ``storm-redis-warm`` is that same group
reading the same records again from a second topic (Tansu will not let an
idle faust group's offsets be reset). ``storm-redis-cold`` is a new group with
Redis on: every lookup misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.demo.expected import CONSUMERS, Expected
from app.demo.progress import read_state
from app.demo.verdict import Verdict, compare
from bench.results import Row
from bench.session import Measured, Session
from bench.worker import worker_env

MISMATCHES_IN_DETAIL = 5


@dataclass(frozen=True)
class Framework:
    """A framework configuration: which of the example consumers its worker runs."""

    name: str
    label: str
    consumers: tuple[str, ...]


ONE = Framework("one", "framework, 1 consumer", ("points-service",))
THREE = Framework("three", "framework, 3 consumers", CONSUMERS)
THREE_REDIS = replace(THREE, name="three-redis", label="framework, 3 consumers, Redis")


async def bare(session: Session) -> Row:
    """The ceiling: faust delivering the events to an agent that does nothing with them."""
    env = worker_env(session.config, app_id=session.app_id("bare"))
    worker = session.worker("bare", env, app_module="bench.bare_app")
    measured = await session.measure(worker, session.messages, count_transactions=False)
    return _row("bare", "bare faust agent", measured, True, "every event acknowledged")


async def warm_up(session: Session, events: int) -> None:
    """Apply the first ``events`` records once, unmeasured, and ANALYZE what they wrote.

    PostgreSQL plans queries on never-analyzed tables badly: the first
    framework scenario on a fresh database ran about 3x slower than the same
    scenario right after it. With statistics collected here (``TRUNCATE``
    keeps them), every measured scenario starts from the same state: empty
    tables, representative statistics, as a long-running database has.
    """
    await session.database.empty()
    env = framework_env(session, THREE, app_id=session.app_id("warm-up"))
    await session.measure(session.worker("warm-up", env), events, count_transactions=False)
    await session.database.analyze()


async def framework(session: Session, setup: Framework, *, redis: bool = False) -> Row:
    """The framework with ``setup``'s consumers, from empty tables; its result is checked."""
    await session.database.empty()
    env = framework_env(session, setup, app_id=session.app_id(setup.name), redis=redis)
    measured = await session.measure(
        session.worker(setup.name, env), session.messages, count_transactions=True
    )
    verdict = await check(session, session.workload.expected, setup.consumers)
    row = _row(setup.name, setup.label, measured, verdict.ok, describe(verdict))
    row.applied_at_span_s = await applied_at_span(session)
    return row


async def storm(
    session: Session, name: str, label: str, *, app_id: str, topic: str, redis: bool
) -> Row:
    """The workload's records again, as ``app_id``, into the database the last run filled."""
    await session.database.settle()
    env = framework_env(session, THREE, app_id=app_id, topic=topic, redis=redis)
    measured = await session.measure(
        session.worker(name, env), session.messages, count_transactions=True
    )
    verdict = await check(session, session.workload.expected, THREE.consumers)
    return _row(name, label, measured, verdict.ok, describe(verdict))


def framework_env(
    session: Session,
    setup: Framework,
    *,
    app_id: str,
    topic: str | None = None,
    redis: bool = False,
) -> dict[str, str]:
    """The environment of a framework worker with ``setup``'s consumers."""
    return worker_env(
        session.config if topic is None else session.on_topic(topic),
        app_id=app_id,
        database_url=session.database.sqlalchemy_url,
        consumers=setup.consumers,
        redis_url=session.options.redis_url if redis else "",
        prefilter_prefix=session.prefilter_prefix if redis else "",
    )


async def check(session: Session, expected: Expected, consumers: Sequence[str]) -> Verdict:
    """The database against ``expected``, for the consumers that ran."""
    state = await read_state(session.database.sqlalchemy_url)
    return compare(only(expected, consumers), state, consumers)


def only(expected: Expected, consumers: Sequence[str]) -> Expected:
    """``expected`` with the tables of consumers that did not run expected empty."""
    if "points-service" not in consumers:
        expected = replace(expected, points={})
    if "inventory-service" not in consumers:
        expected = replace(expected, reserved={})
    if "notification-service" not in consumers:
        expected = replace(expected, notifications=0)
    return expected


def describe(verdict: Verdict) -> str:
    """One line: what was checked, or the first mismatches."""
    if verdict.ok:
        return f"{verdict.balances:,} balances, {verdict.stock_levels:,} stock levels match"
    shown = "; ".join(
        f"{m.what} {m.key}: expected {m.expected:,}, found {m.actual:,}"
        for m in verdict.mismatches[:MISMATCHES_IN_DETAIL]
    )
    return f"MISMATCH in {len(verdict.mismatches):,} values: {shown}"


async def applied_at_span(session: Session) -> float | None:
    """Seconds from the first to the last ``applied_at``: a database-side cross-check."""
    stamps = [applied for _, _, applied in await session.database.applied_at()]
    if not stamps:
        return None
    return (max(stamps) - min(stamps)).total_seconds()


def _row(name: str, label: str, measured: Measured, correct: bool, detail: str) -> Row:
    window = measured.window
    worker_ms, database_ms = (
        (None, None) if measured.spent is None else measured.spent.per_1k_ms(window.events)
    )
    return Row(
        name=name,
        label=label,
        events=window.events,
        seconds=window.seconds,
        events_per_s=window.per_second,
        correct=correct,
        detail=detail,
        tx_per_1k=measured.tx_per_1k,
        peak_rss_mb=measured.peak_rss_mb,
        load_average=measured.load_average,
        steal_percent=measured.steal_percent,
        code=measured.code,
        worker_cpu_ms_per_1k=worker_ms,
        database_cpu_ms_per_1k=database_ms,
    )
