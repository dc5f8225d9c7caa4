"""The soak's schedule strikes every fault the issue lists, inside the chaos window.

Contract of ``chaos.schedule.plan``: a worker SIGKILL every ``kill_every`` seconds
of the window; the workers' sessions terminated and the broker connections cut as
often as the profile says; the database blackholed for ``blackhole_seconds``, the
database crashed, Redis flushed and Redis killed once each; relays killed only when
the source has them; in the full and short profiles the broker down once, longer than
the lease the workers' relays are given, after the other outages are over. Every
fault starts inside the window, the one-off faults at distinct times, and the lasting
ones end before the window does.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import pytest

from chaos.profile import CLUSTER, FULL, SHORT, Profile
from chaos.schedule import LASTING, FaultKind, plan

DATABASE_OUTAGES = (FaultKind.DATABASE_BLACKHOLE, FaultKind.DATABASE_CRASH)
BROKER_OUTAGES = (FaultKind.LEADER_KILL, FaultKind.BROKER_BLACKHOLE)


@pytest.mark.parametrize("profile", [FULL, SHORT, CLUSTER], ids=lambda p: p.name)
def test_every_fault_in_the_window(profile: Profile) -> None:
    faults = plan(profile)
    counts = Counter(fault.kind for fault in faults)
    expected = {
        # strictly inside the window: a kill at its very end is not planned
        FaultKind.WORKER_KILL: math.ceil(profile.window / profile.kill_every) - 1,
        FaultKind.SESSIONS_TERMINATED: profile.terminations,
        FaultKind.BROKER_CUT: profile.broker_cuts,
        FaultKind.DATABASE_BLACKHOLE: 1,
        FaultKind.DATABASE_CRASH: 1,
        FaultKind.REDIS_FLUSH: 1,
        FaultKind.REDIS_KILL: 1,
        FaultKind.LEADER_KILL: profile.leader_kills,
        FaultKind.BROKER_BLACKHOLE: profile.broker_blackholes,
        FaultKind.BROKER_DOWN: profile.broker_downs,
    }
    assert counts == {kind: n for kind, n in expected.items() if n}
    assert faults == sorted(faults)
    assert all(0 < fault.at and fault.at + fault.seconds < profile.window for fault in faults)
    one_offs = [fault.at for fault in faults if fault.kind is not FaultKind.WORKER_KILL]
    assert len(set(one_offs)) == len(one_offs)
    kills = [fault.at for fault in faults if fault.kind is FaultKind.WORKER_KILL]
    assert kills == [profile.kill_every * n for n in range(1, len(kills) + 1)]
    blackhole = next(f for f in faults if f.kind is FaultKind.DATABASE_BLACKHOLE)
    assert blackhole.seconds == profile.blackhole_seconds
    assert all(f.seconds > 0 for f in faults if f.kind in LASTING)


def test_the_single_broker_profiles_strike_no_broker_node() -> None:
    for profile in (FULL, SHORT):
        assert profile.brokers == 1 and profile.replication_factor == 1
        assert not {f.kind for f in plan(profile)} & set(BROKER_OUTAGES)


def test_the_cluster_profile_kills_a_leader_and_blackholes_a_broker() -> None:
    assert (CLUSTER.brokers, CLUSTER.replication_factor, CLUSTER.min_insync_replicas) == (3, 3, 2)
    assert (CLUSTER.shape.events, CLUSTER.rate, CLUSTER.window) == (30_000, 200.0, 150.0)
    assert (CLUSTER.workers, CLUSTER.partitions) == (3, 8)
    faults = plan(CLUSTER)
    kill = next(f for f in faults if f.kind is FaultKind.LEADER_KILL)
    blackhole = next(f for f in faults if f.kind is FaultKind.BROKER_BLACKHOLE)
    assert (kill.seconds, blackhole.seconds) == (10.0, 30.0)


def test_broker_outages_do_not_land_on_the_databases() -> None:
    faults = plan(CLUSTER)
    database = [f for f in faults if f.kind in DATABASE_OUTAGES]
    broker = [f for f in faults if f.kind in BROKER_OUTAGES]
    assert database and broker
    for b in broker:
        for d in database:
            assert b.at + b.seconds <= d.at or d.at + d.seconds <= b.at, (b, d)


@pytest.mark.parametrize("profile", [FULL, SHORT], ids=lambda p: p.name)
def test_the_broker_is_down_longer_than_the_relay_lease_and_on_its_own(profile: Profile) -> None:
    faults = plan(profile)
    (down,) = [f for f in faults if f.kind is FaultKind.BROKER_DOWN]
    assert down.seconds == profile.broker_down_seconds > profile.relay_lease_seconds
    assert profile.relay_lease_seconds == 10.0 and down.seconds == 15.0
    others = [f for f in faults if f.kind in LASTING and f is not down]
    assert others
    for other in others:
        assert other.at + other.seconds <= down.at, (other, down)


def test_the_cluster_profile_keeps_the_default_lease_and_no_broker_down() -> None:
    assert CLUSTER.relay_lease_seconds == 60.0
    assert FaultKind.BROKER_DOWN not in {f.kind for f in plan(CLUSTER)}


def test_an_outage_no_longer_than_the_lease_is_refused() -> None:
    with pytest.raises(ValueError, match="not longer than the relay lease"):
        replace(SHORT, relay_lease_seconds=15.0)
    assert replace(SHORT, relay_lease_seconds=15.0, broker_downs=0).broker_downs == 0


def test_the_full_profile_is_the_issues_soak() -> None:
    assert FULL.shape.events == 100_000 and FULL.shape.aggregates == 1_000
    assert (FULL.shape.duplicate_ratio, FULL.shape.swap_ratio) == (0.10, 0.05)
    assert FULL.shape.poison_ratio == 0.005
    assert FULL.workers == 3 and FULL.kill_every == 15 and FULL.blackhole_seconds == 30


def test_relays_are_killed_only_when_the_source_has_them() -> None:
    assert FaultKind.RELAY_KILL not in {f.kind for f in plan(SHORT)}
    relay_kills = [f for f in plan(SHORT, relays=True) if f.kind is FaultKind.RELAY_KILL]
    assert [f.at for f in relay_kills] == [20.0, 40.0, 60.0]  # 80 s is the window's end
