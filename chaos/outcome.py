"""What one soak did and found: the input of its table and of its JSON file."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from chaos.faults import Injected
from chaos.profile import Profile
from chaos.schedule import FaultKind
from chaos.scrape import Hang
from chaos.verify import Findings
from chaos.watch import SAMPLE_SECONDS, Sample, Stall, stall_outside
from chaos.workers import Exit
from chaos.workload import Workload

# A SIGKILLed member holds its partitions until its session times out, then the group
# rebalances: a fault up to this long before a stall may be its cause.
STALL_LEAD_SECONDS = 15.0

# The faults during which no commit can happen at all: the database unreachable, or the
# broker refusing every connection. Their seconds are the fault's, not the framework's.
OUTAGES = frozenset({FaultKind.DATABASE_BLACKHOLE, FaultKind.DATABASE_CRASH, FaultKind.BROKER_DOWN})


@dataclass
class Outcome:
    """A soak run, from its profile to its findings (``findings`` is None if it never got
    that far; ``failure`` then says why)."""

    profile: Profile
    backend: str
    source: str
    workload: Workload
    broker: str = "kafka"
    planned: dict[FaultKind, int] = field(default_factory=dict)
    ledger: list[Injected] = field(default_factory=list)
    stall: Stall = field(default_factory=Stall)
    samples: list[Sample] = field(default_factory=list)  # the progress watch's, each second
    hang: Hang | None = None  # the longest a single worker finished no batch with work waiting
    drain_seconds: float | None = None  # None: not drained in time
    pending_at_end: int | None = None
    exits: list[Exit] = field(default_factory=list)
    stopped: dict[str, int | None] = field(default_factory=dict)  # exit code on SIGTERM
    worker_totals: Counter[str] = field(default_factory=Counter)
    resends: int = 0
    findings: Findings | None = None
    failure: str | None = None
    wall_seconds: float = 0.0
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)  # at the end
    loads: list[float] = field(default_factory=list)  # 1-minute load, each second of the soak

    @property
    def drained(self) -> bool:
        """The group caught up within the profile's drain timeout."""
        return self.drain_seconds is not None

    @property
    def exact(self) -> bool:
        """The verdict: drained, every check exact, every fault injected, no worker that exited
        on its own, and each exited 0 when told to stop."""
        return (
            self.failure is None
            and self.drained
            and self.findings is not None
            and self.findings.exact
            and not self.exits
            and all(code == 0 for code in self.stopped.values())
            and not any(fault.failed for fault in self.ledger)
        )

    def around_stall(self) -> list[Injected]:
        """The faults that may have begun the longest stall: struck in the ``STALL_LEAD_SECONDS``
        before it began (or as it began), or lasting then."""
        start = self.stall.start
        return sorted(
            (
                f
                for f in self.ledger
                if start - STALL_LEAD_SECONDS <= f.at <= start + SAMPLE_SECONDS
                or f.at <= start <= f.at + f.seconds
            ),
            key=lambda fault: fault.at,
        )

    @property
    def stall_outside_outages(self) -> Stall:
        """The longest time without progress that no outage explains: the seconds while the
        database or the broker was unreachable left out, counted again from each one's end."""
        windows = [(f.at, f.at + f.seconds) for f in self.ledger if f.kind in OUTAGES]
        return stall_outside(self.samples, windows)

    def injected(self) -> Counter[FaultKind]:
        """Faults injected (successfully), by kind."""
        return Counter(fault.kind for fault in self.ledger if not fault.failed)
