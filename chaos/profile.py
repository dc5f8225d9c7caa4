"""The soak's profiles: ``full`` (the documented run), ``short`` (CI, about 2 minutes) and
``cluster`` (three Kafka brokers, replication factor 3, brokers killed and cut off).

A profile says how much load is offered for how long, how many workers take it,
and how hard and how often each fault strikes. Faults strike only while the load
is offered (the chaos window); afterwards the soak waits for the group to drain
and checks the result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chaos.workload import Shape


@dataclass(frozen=True)
class Profile:
    """One soak: its workload, pace, group size and fault intensities."""

    name: str
    shape: Shape
    rate: float  # records offered per second
    workers: int = 3
    partitions: int = 8
    kill_every: float = 15.0  # a random worker SIGKILLed this often (and restarted)
    terminations: int = 3  # times the workers' database sessions are terminated
    blackhole_seconds: float = 30.0  # the database connection blackholed once, this long
    database_down_seconds: float = 5.0  # the database crashed once, restarted after this
    redis_down_seconds: float = 10.0  # Redis killed once, restarted after this
    broker_cuts: int = 2  # times every broker connection is cut
    drain_timeout: float = 300.0  # after the window: how long the group may take to catch up
    relay_kill_every: float = 20.0  # producer-side processes (relays), when the source has them
    brokers: int = 1  # Kafka nodes; more than one needs Apache Kafka
    leader_kills: int = 0  # times the leader of the busiest partition is SIGKILLed
    leader_down_seconds: float = 10.0  # ... and restarted after this
    broker_blackholes: int = 0  # times one broker's connections are blackholed
    broker_blackhole_seconds: float = 30.0  # ... and healed after this
    relay_lease_seconds: float = 60.0  # the workers' RELAY_LEASE_SECONDS (the default: 60)
    broker_downs: int = 0  # times every broker is down (connections refused) ...
    broker_down_seconds: float = 15.0  # ... this long: longer than the relay lease

    def __post_init__(self) -> None:
        if self.broker_downs and self.broker_down_seconds <= self.relay_lease_seconds:
            raise ValueError(
                f"a broker outage of {self.broker_down_seconds:g} s is not longer than the "
                f"relay lease ({self.relay_lease_seconds:g} s)"
            )

    @property
    def window(self) -> float:
        """Seconds the load is offered (and faults strike)."""
        return self.shape.events / self.rate

    @property
    def replication_factor(self) -> int:
        """Copies of each partition of the soak's topics: one per broker, at most three."""
        return min(3, self.brokers)

    @property
    def min_insync_replicas(self) -> int:
        """Copies a write with ``acks=all`` needs: a majority of ``replication_factor``."""
        return self.replication_factor // 2 + 1


# The relays' lease is shortened so that an outage longer than it costs seconds, not minutes.
FULL = Profile(
    name="full",
    shape=Shape(),
    rate=400.0,
    relay_lease_seconds=10.0,
    broker_downs=1,
    broker_down_seconds=15.0,
)

SHORT = Profile(
    name="short",
    shape=Shape(events=10_000, aggregates=100, seed=23),
    rate=125.0,  # an 80 s window
    terminations=2,
    blackhole_seconds=10.0,
    database_down_seconds=3.0,
    redis_down_seconds=5.0,
    broker_cuts=1,
    drain_timeout=120.0,
    relay_lease_seconds=10.0,
    broker_downs=1,
    broker_down_seconds=15.0,
)

CLUSTER = Profile(
    name="cluster",
    shape=Shape(events=30_000, aggregates=300, seed=37),
    rate=200.0,  # a 150 s window
    terminations=2,
    blackhole_seconds=20.0,
    database_down_seconds=5.0,
    redis_down_seconds=8.0,
    broker_cuts=2,
    drain_timeout=420.0,
    brokers=3,
    leader_kills=1,
    leader_down_seconds=10.0,
    broker_blackholes=1,
    broker_blackhole_seconds=30.0,
)

PROFILES = {profile.name: profile for profile in (FULL, SHORT, CLUSTER)}


def with_overrides(
    profile: Profile, *, events: int | None, rate: float | None, seed: int | None
) -> Profile:
    """``profile`` with a different size, pace or seed (the faults scale with the window)."""
    shape = profile.shape
    if events is not None:
        shape = replace(shape, events=events)
    if seed is not None:
        shape = replace(shape, seed=seed)
    return replace(profile, shape=shape, rate=rate or profile.rate)
