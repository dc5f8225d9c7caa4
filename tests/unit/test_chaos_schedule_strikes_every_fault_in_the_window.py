"""The soak's schedule strikes every fault the issue lists, inside the chaos window.

Contract of ``chaos.schedule.plan``: a worker SIGKILL every ``kill_every`` seconds
of the window; the workers' sessions terminated and the broker connections cut as
often as the profile says; the database blackholed for ``blackhole_seconds``, the
database crashed, Redis flushed and Redis killed once each; relays killed only when
the source has them. Every fault starts inside the window, the one-off faults at
distinct times, and the lasting ones end before the window does.
"""

from __future__ import annotations

from collections import Counter

import pytest

from chaos.profile import FULL, SHORT, Profile
from chaos.schedule import FaultKind, plan


@pytest.mark.parametrize("profile", [FULL, SHORT], ids=lambda p: p.name)
def test_every_fault_in_the_window(profile: Profile) -> None:
    faults = plan(profile)
    counts = Counter(fault.kind for fault in faults)
    assert counts == {
        FaultKind.WORKER_KILL: int(profile.window // profile.kill_every),
        FaultKind.SESSIONS_TERMINATED: profile.terminations,
        FaultKind.BROKER_CUT: profile.broker_cuts,
        FaultKind.DATABASE_BLACKHOLE: 1,
        FaultKind.DATABASE_CRASH: 1,
        FaultKind.REDIS_FLUSH: 1,
        FaultKind.REDIS_KILL: 1,
    }
    assert faults == sorted(faults)
    assert all(0 < fault.at and fault.at + fault.seconds < profile.window for fault in faults)
    one_offs = [fault.at for fault in faults if fault.kind is not FaultKind.WORKER_KILL]
    assert len(set(one_offs)) == len(one_offs)
    kills = [fault.at for fault in faults if fault.kind is FaultKind.WORKER_KILL]
    assert kills == [profile.kill_every * n for n in range(1, len(kills) + 1)]
    blackhole = next(f for f in faults if f.kind is FaultKind.DATABASE_BLACKHOLE)
    assert blackhole.seconds == profile.blackhole_seconds


def test_the_full_profile_is_the_issues_soak() -> None:
    assert FULL.shape.events == 100_000 and FULL.shape.aggregates == 1_000
    assert (FULL.shape.duplicate_ratio, FULL.shape.swap_ratio) == (0.10, 0.05)
    assert FULL.shape.poison_ratio == 0.005
    assert FULL.workers == 3 and FULL.kill_every == 15 and FULL.blackhole_seconds == 30


def test_relays_are_killed_only_when_the_source_has_them() -> None:
    assert FaultKind.RELAY_KILL not in {f.kind for f in plan(SHORT)}
    relay_kills = [f for f in plan(SHORT, relays=True) if f.kind is FaultKind.RELAY_KILL]
    assert [f.at for f in relay_kills] == [20.0, 40.0, 60.0]  # 80 s is the window's end
