"""Inject the planned faults at their time, and keep a ledger of what was done.

Each fault runs as a task of its own, so a 30 s blackhole does not hold up the
kills planned meanwhile. A fault that lasts (blackhole, crash, Redis down) is
undone in a ``finally``: an interrupted soak still leaves its services up for
the clean-up.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from chaos.brokers import ChaosBrokers
from chaos.database import ChaosDatabase
from chaos.proxy import TcpProxy
from chaos.redis import ChaosRedis
from chaos.schedule import FaultKind, Planned
from chaos.workers import WorkerPool


@dataclass(frozen=True)
class Injected:
    """A fault as it happened: when (seconds since the soak's start), how long, what it hit."""

    kind: FaultKind
    at: float
    seconds: float
    detail: str
    failed: str | None = None  # the injection itself went wrong (the soak's own problem)


@dataclass
class Targets:
    """What the faults strike."""

    workers: WorkerPool
    database: ChaosDatabase
    database_proxy: TcpProxy
    brokers: ChaosBrokers
    redis: ChaosRedis
    topic: str  # the one whose busiest partition's leader is killed
    relays: WorkerPool | None = None


@dataclass
class Injector:
    """Strikes ``Targets`` on a plan; ``ledger`` lists every fault once it is over."""

    targets: Targets
    seed: int
    started: float = field(default_factory=time.monotonic)  # the soak's t=0
    ledger: list[Injected] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._strikes: dict[FaultKind, Callable[[Planned], Awaitable[str]]] = {
            FaultKind.WORKER_KILL: self._kill_worker,
            FaultKind.RELAY_KILL: self._kill_relay,
            FaultKind.SESSIONS_TERMINATED: self._terminate_sessions,
            FaultKind.DATABASE_BLACKHOLE: self._blackhole_database,
            FaultKind.DATABASE_CRASH: self._crash_database,
            FaultKind.REDIS_FLUSH: self._flush_redis,
            FaultKind.REDIS_KILL: self._kill_redis,
            FaultKind.BROKER_CUT: self._cut_broker,
            FaultKind.LEADER_KILL: self._kill_leader,
            FaultKind.BROKER_BLACKHOLE: self._blackhole_broker,
            FaultKind.BROKER_DOWN: self._take_broker_down,
        }

    def now(self) -> float:
        """Seconds since the soak's start."""
        return time.monotonic() - self.started

    async def run(self, faults: list[Planned], window_start: float) -> None:
        """Strike each of ``faults`` at ``window_start + at``; return once all are over."""
        strikes: list[asyncio.Task[None]] = []
        try:
            for planned in faults:
                delay = window_start + planned.at - self.now()
                if delay > 0:
                    await asyncio.sleep(delay)
                strikes.append(asyncio.create_task(self._strike(planned)))
            await asyncio.gather(*strikes)
        finally:
            for task in strikes:
                task.cancel()
            await asyncio.gather(*strikes, return_exceptions=True)

    async def _strike(self, planned: Planned) -> None:
        at = self.now()
        try:
            detail = await self._strikes[planned.kind](planned)
        except Exception as exc:
            self.ledger.append(Injected(planned.kind, at, self.now() - at, "", repr(exc)))
        else:
            self.ledger.append(Injected(planned.kind, at, self.now() - at, detail))

    async def _kill_worker(self, _: Planned) -> str:
        return self._kill_one(self.targets.workers)

    async def _kill_relay(self, _: Planned) -> str:
        if self.targets.relays is None:
            return "no relays"
        return self._kill_one(self.targets.relays)

    def _kill_one(self, pool: WorkerPool) -> str:
        live = pool.live()
        if not live:
            return "none running"
        return pool.kill(self._rng.choice(live))

    async def _terminate_sessions(self, _: Planned) -> str:
        ports = await asyncio.to_thread(self.targets.database_proxy.service_ports)
        ended = await self.targets.database.terminate(ports)
        return f"{ended} of {len(ports)} sessions"

    async def _blackhole_database(self, planned: Planned) -> str:
        # The outage a failover or an expired NAT entry makes: nothing gets through for a
        # while, and the connections open then never come back (the server forgot them,
        # the workers are told nothing); connections made afterwards work.
        proxy = self.targets.database_proxy

        async def abandon_and_heal() -> None:
            await asyncio.to_thread(proxy.abandon)
            await asyncio.to_thread(proxy.heal)

        held = proxy.open_connections
        await _outage(lambda: asyncio.to_thread(proxy.blackhole), abandon_and_heal, planned)
        return f"{held} connections silent, then abandoned: no FIN, no RST to the workers"

    async def _crash_database(self, planned: Planned) -> str:
        database = self.targets.database
        await _outage(database.crash, database.start_again, planned)
        return f"{database.backend} down {planned.seconds:g} s"

    async def _flush_redis(self, _: Planned) -> str:
        return f"{await self.targets.redis.flush():,} keys forgotten"

    async def _kill_redis(self, planned: Planned) -> str:
        redis = self.targets.redis
        await _outage(redis.kill, redis.start, planned)
        return f"down {planned.seconds:g} s, back empty"

    async def _cut_broker(self, _: Planned) -> str:
        brokers = self.targets.brokers
        count = brokers.open_connections
        await asyncio.to_thread(brokers.cut)
        return f"{count} connections closed with a FIN"

    async def _kill_leader(self, planned: Planned) -> str:
        # A crashed machine: the controller notices when the node's heartbeats stop and
        # moves its leaderships to replicas in sync; the node comes back on its own data.
        brokers = self.targets.brokers
        node, partition, records = await brokers.busiest_leader(self.targets.topic)
        await asyncio.to_thread(node.kill)
        await asyncio.sleep(planned.seconds)
        await asyncio.to_thread(brokers.cluster.restart, node)
        return (
            f"node {node.node_id}, leader of partition {partition} ({records:,} records), "
            f"down {planned.seconds:g} s"
        )

    async def _blackhole_broker(self, planned: Planned) -> str:
        # Nothing reaches the node from clients or from its peers' replica fetchers, and
        # nobody is told. The quorum still hears the node (its own listener), so the node
        # keeps its leaderships, unreachable, while their other replicas drop out of sync.
        brokers = self.targets.brokers
        node = self._rng.choice(brokers.cluster.nodes)
        proxy = brokers.proxy_of(node)
        held = proxy.open_connections
        await _outage_in_threads(proxy.blackhole, proxy.heal, planned)
        return f"node {node.node_id}: {held} connections silent {planned.seconds:g} s, then healed"

    async def _take_broker_down(self, planned: Planned) -> str:
        # Longer than the relays' lease: a relay that cannot publish meanwhile must keep the
        # rows it holds (or stop sending once it lost them), and the group rejoins after.
        brokers = self.targets.brokers
        held = brokers.open_connections
        await _outage_in_threads(brokers.take_down, brokers.bring_back, planned)
        return f"{held} connections reset, new ones refused {planned.seconds:g} s"


async def _outage(
    down: Callable[[], Awaitable[object]], up: Callable[[], Awaitable[object]], planned: Planned
) -> None:
    """``down``, ``planned.seconds`` of outage, then ``up`` (also when interrupted)."""
    await down()
    try:
        await asyncio.sleep(planned.seconds)
    finally:
        await up()


async def _outage_in_threads(
    down: Callable[[], object], up: Callable[[], object], planned: Planned
) -> None:
    """``_outage`` of two blocking calls (a proxy's), each run in a thread."""
    await _outage(lambda: asyncio.to_thread(down), lambda: asyncio.to_thread(up), planned)
