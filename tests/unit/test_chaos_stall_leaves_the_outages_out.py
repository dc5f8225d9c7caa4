"""The soak's second stall figure leaves out the seconds no commit could happen.

Contract of ``chaos.watch.stall_outside`` (and ``Outcome.stall_outside_outages``): from
the progress watch's samples, the longest stretch with work pending and no committed
offset moving, where the samples inside an outage window (the database blackholed or
crashed, the broker refusing everyone) count as nothing pending. A stretch that began
before an outage and went on through it counts again from the outage's end; a stall
in no outage counts whole; other faults (a worker SIGKILLed, Redis killed) are no
outage.
"""

from __future__ import annotations

from typing import cast

from chaos.faults import Injected
from chaos.outcome import Outcome
from chaos.profile import SHORT
from chaos.schedule import FaultKind
from chaos.watch import ProgressWatch, Sample, Stall, StallTracker, stall_outside
from chaos.workload import Workload


def samples(moves: dict[int, int], pending: int = 50) -> list[Sample]:
    """One sample a second up to the last move; ``done`` jumps to ``moves[t]`` at second ``t``."""
    done, out = 0, []
    for t in range(max(moves) + 1):
        done = moves.get(t, done)
        out.append(Sample(float(t), done, pending))
    return out


def test_an_outage_and_what_follows_it() -> None:
    # Progress at 10, then nothing until 52: an outage from 12 to 42, back 10 s after it.
    seen = samples({0: 1, 5: 3, 10: 5, 52: 9, 60: 12})
    raw = StallTracker()
    for s in seen:
        raw.observe(s.at, s.done, s.pending)
    assert raw.longest == Stall(10.0, 41.0)  # the last sample before the move
    assert stall_outside(seen, [(12.0, 42.0)]) == Stall(42.0, 9.0)


def test_an_outage_without_samples_restarts_the_count_at_its_end() -> None:
    # The broker down from 12 to 42 answers no sample: none between 11 and 43.
    seen = [s for s in samples({0: 1, 5: 3, 10: 5, 52: 9, 60: 12}) if not 11 < s.at < 43]
    assert stall_outside(seen, [(12.0, 42.0)]) == Stall(42.0, 9.0)


def test_a_stall_away_from_outages_counts_whole() -> None:
    seen = samples({0: 1, 5: 2, 40: 3, 45: 4})
    assert stall_outside(seen, [(41.0, 44.0)]) == Stall(5.0, 34.0)


def test_the_outcome_leaves_out_only_the_faults_that_stop_every_commit() -> None:
    seen = samples({0: 1, 5: 2, 10: 3, 60: 4})
    outcome = Outcome(SHORT, "postgresql", "producer", cast(Workload, None), samples=seen)
    outcome.ledger = [Injected(FaultKind.REDIS_KILL, 12.0, 40.0, "down 40 s")]
    assert outcome.stall_outside_outages.seconds == 49.0
    outcome.ledger = [Injected(FaultKind.DATABASE_BLACKHOLE, 12.0, 40.0, "silent")]
    assert outcome.stall_outside_outages == Stall(52.0, 7.0)
    outcome.ledger = [Injected(FaultKind.BROKER_DOWN, 11.0, 42.0, "refused")]
    assert outcome.stall_outside_outages == Stall(53.0, 6.0)


def test_the_watch_keeps_every_sample_it_takes() -> None:
    watch = ProgressWatch("127.0.0.1:9", "group", "topic", 2, lambda: {0: 10, 1: 10}, started=0.0)
    watch._sample({0: 4, 1: 6})
    watch._sample({0: 10, 1: -1})
    assert [(s.done, s.pending) for s in watch.samples] == [(10, 10), (10, 10)]
