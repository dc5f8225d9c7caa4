"""When each fault strikes: a pure function of the profile.

A worker is SIGKILLed every ``kill_every`` seconds throughout the chaos window;
each other fault strikes at a fixed share of the window, spread so that the
one-off faults do not land on top of each other (kills may coincide with any):

    terminations   15 % ... 85 %    broker cuts   20 % ... 60 %
    blackhole      25 %             Redis flush   35 %
    database crash 45 %             Redis kill    70 %
    leader kill    50 % ... 60 %    broker blackhole  72 % ... 76 %
    broker down    78 % ... 80 %

The two broker faults (profiles with several brokers) come after the database's
blackhole and crash are over, and the broker's outage (longer than the relays'
lease) after Redis is back, so that each outage is met on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from chaos.profile import Profile


class FaultKind(StrEnum):
    """Every kind of fault the soak injects (the rows of its table)."""

    WORKER_KILL = "worker SIGKILLed (restarted)"
    RELAY_KILL = "relay SIGKILLed (restarted)"
    SESSIONS_TERMINATED = "database sessions terminated"
    DATABASE_BLACKHOLE = "database connections blackholed, then abandoned"
    DATABASE_CRASH = "database crashed and restarted"
    REDIS_FLUSH = "Redis flushed"
    REDIS_KILL = "Redis killed (restarted)"
    BROKER_CUT = "broker connections cut"
    LEADER_KILL = "partition leader SIGKILLed (restarted)"
    BROKER_BLACKHOLE = "one broker's connections blackholed, then healed"
    BROKER_DOWN = "broker down, longer than the relay lease"


LASTING = frozenset(
    {
        FaultKind.DATABASE_BLACKHOLE,
        FaultKind.DATABASE_CRASH,
        FaultKind.REDIS_KILL,
        FaultKind.LEADER_KILL,
        FaultKind.BROKER_BLACKHOLE,
        FaultKind.BROKER_DOWN,
    }
)
"""The faults that last a while (the others strike at once)."""


@dataclass(frozen=True, order=True)
class Planned:
    """One fault: when it strikes (seconds into the window) and how long it lasts."""

    at: float
    kind: FaultKind
    seconds: float = 0.0


def plan(profile: Profile, relays: bool = False) -> list[Planned]:
    """Every fault of ``profile``'s window, in time order; ``relays``: the source has
    producer-side processes to kill as well."""
    window = profile.window
    faults = [Planned(at, FaultKind.WORKER_KILL) for at in _every(profile.kill_every, window)]
    if relays:
        faults += [
            Planned(at, FaultKind.RELAY_KILL) for at in _every(profile.relay_kill_every, window)
        ]
    faults += [
        Planned(window * share, FaultKind.SESSIONS_TERMINATED)
        for share in _spread(profile.terminations, 0.15, 0.85)
    ]
    faults += [
        Planned(window * share, FaultKind.BROKER_CUT)
        for share in _spread(profile.broker_cuts, 0.20, 0.60)
    ]
    faults += [
        Planned(window * 0.25, FaultKind.DATABASE_BLACKHOLE, profile.blackhole_seconds),
        Planned(window * 0.35, FaultKind.REDIS_FLUSH),
        Planned(window * 0.45, FaultKind.DATABASE_CRASH, profile.database_down_seconds),
        Planned(window * 0.70, FaultKind.REDIS_KILL, profile.redis_down_seconds),
    ]
    faults += [
        Planned(window * share, FaultKind.LEADER_KILL, profile.leader_down_seconds)
        for share in _spread(profile.leader_kills, 0.50, 0.60)
    ]
    faults += [
        Planned(window * share, FaultKind.BROKER_BLACKHOLE, profile.broker_blackhole_seconds)
        for share in _spread(profile.broker_blackholes, 0.72, 0.76)
    ]
    faults += [
        Planned(window * share, FaultKind.BROKER_DOWN, profile.broker_down_seconds)
        for share in _spread(profile.broker_downs, 0.78, 0.80)
    ]
    return sorted(faults)


def _every(interval: float, window: float) -> list[float]:
    """``interval``, ``2 * interval``, ... before the window's end."""
    count = int(window // interval) if interval > 0 else 0
    return [interval * n for n in range(1, count + 1) if interval * n < window]


def _spread(count: int, first: float, last: float) -> list[float]:
    """``count`` shares evenly from ``first`` to ``last`` (one: their middle)."""
    if count <= 0:
        return []
    if count == 1:
        return [(first + last) / 2]
    step = (last - first) / (count - 1)
    return [first + step * n for n in range(count)]
