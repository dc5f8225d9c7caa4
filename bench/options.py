"""What one benchmark run measures, on how many events: the knobs of ``python -m bench``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from app.settings import Settings
from bench.workload import orders_for

_WORKER = Settings.model_fields


class Scenario(StrEnum):
    """The rows of the result table, in the order they run."""

    BARE = "bare"  # a faust agent that takes the events and does nothing: the ceiling
    ONE = "one"  # the framework, points-service only
    THREE = "three"  # the framework, the three example consumers
    STORM = "storm"  # the topic again for a new group over what ``three`` applied, no Redis
    # ``three`` with Redis on (fills the prefilter), then a storm by a new group (Redis
    # cold) and by the same group (Redis warm): three rows
    STORM_REDIS = "storm-redis"
    # One relay process shipping a full outbox, its latency at 1,000 events/s, and the
    # outbox-to-commit latency of the three consumers behind it: three rows
    RELAY = "relay"

    @classmethod
    def parse(cls, text: str) -> tuple[Scenario, ...]:
        """``"bare,one"`` -> the scenarios, in run order; ``storm`` and ``relay`` need
        ``three`` first."""
        names = {name.strip() for name in text.split(",") if name.strip()}
        unknown = names - {s.value for s in cls}
        if unknown:
            known = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown scenario(s) {', '.join(sorted(unknown))}; known: {known}")
        chosen = {cls(name) for name in names}
        if cls.STORM in chosen:
            chosen.add(cls.THREE)  # the storm redelivers what ``three`` applied, into its database
        if cls.RELAY in chosen:
            chosen.add(cls.THREE)  # end to end runs at half of what ``three`` measured
        return tuple(s for s in cls if s in chosen)


@dataclass(frozen=True)
class BenchOptions:
    """One benchmark run; ``smoke`` runs the same code on a small workload, for correctness."""

    events_approx: int = 100_000
    orders: int | None = None  # overrides events_approx
    batch_size: int = _WORKER["batch_size"].default
    batch_wait: float = _WORKER["batch_wait_seconds"].default
    partitions: int = 8
    database_url: str | None = None  # None: a fresh PostgreSQL database, dropped at the end
    postgres_server: str = "postgresql://postgres@127.0.0.1:5432"
    redis_url: str = "redis://127.0.0.1:6379/0"
    json_out: str = "bench-results.json"
    scenarios: tuple[Scenario, ...] = tuple(Scenario)
    latency: bool = True
    latency_seconds: float = 15.0
    latency_load: float = 0.5  # offered load, as a share of the scenario's measured maximum
    smoke: bool = False
    broker: str = "kafka"  # or "tansu" (see app.demo.local)

    @property
    def order_count(self) -> int:
        """Orders to generate: ``orders`` if given, else enough for about ``events_approx``."""
        return self.orders if self.orders is not None else orders_for(self.events_approx)


def smoke_options(options: BenchOptions) -> BenchOptions:
    """``options`` shrunk to a quick correctness run (about 1,500 events, 3 s of paced load)."""
    return replace(options, events_approx=1_500, orders=None, latency_seconds=3.0, smoke=True)
