"""A relay never fails quietly: one that cannot run, or whose cycles stop ending, says so.

Contract (``RelayRunner.health``, the ``relay`` check of ``/ready``): a relay that stopped
on an error it cannot retry (the broker refused its producer) fails the check with the
reason, and sets ``effectively_once_relay_failed`` to 1; a relay that is alive but has
ended no claim-publish-settle cycle for ``RELAY_STALL_SECONDS`` (a broker it cannot
reach, a cycle that hangs) fails it too, naming the broker's error where there is one;
a relay whose cycles keep ending passes. Real time, a SQLite URL that is never opened,
and stand-in producers for the broker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.metrics import REGISTRY
from app.outbox.broker import BrokerRefused
from app.outbox.runner import RelayRunner
from app.settings import Settings

STALL = 0.3


class RefusingBroker:
    """A broker that refuses the producer as configured."""

    async def start(self) -> None:
        raise BrokerRefused("the broker refused an idempotent producer (UnknownError)")

    async def stop(self) -> None:
        return None


class UnreachableBroker(RefusingBroker):
    """A broker nobody answers for."""

    async def start(self) -> None:
        raise ConnectionRefusedError("connection refused by 127.0.0.1:9")


class ReachableBroker(RefusingBroker):
    """A broker that lets the producer start."""

    async def start(self) -> None:
        return None


def runner(tmp_path: Path, broker: Any) -> RelayRunner:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'never-opened.db'}",
        relay_stall_seconds=STALL,
        relay_idle_poll_max_seconds=STALL / 3,
        infra_retry_initial_seconds=0.05,
        infra_retry_max_seconds=0.05,
    )
    relay_runner = RelayRunner(settings, sample=False)
    relay_runner.broker = broker
    return relay_runner


def relay_failed() -> float | None:
    return REGISTRY.get_sample_value("effectively_once_relay_failed")


async def test_a_refused_producer_fails_the_check_with_its_reason(tmp_path: Path) -> None:
    relay_runner = runner(tmp_path, RefusingBroker())
    relay_runner.start()
    await asyncio.wait_for(relay_runner.wait(), 5)

    check = relay_runner.health()
    assert (check.name, check.ok) == ("relay", False)
    assert "the relay cannot run" in check.detail
    assert "refused an idempotent producer" in check.detail
    assert relay_failed() == 1
    await relay_runner.stop()


async def test_an_unreachable_broker_fails_the_check_once_cycles_stall(tmp_path: Path) -> None:
    relay_runner = runner(tmp_path, UnreachableBroker())
    relay_runner.start()
    await asyncio.sleep(0.1)
    assert relay_runner.health().ok, "within RELAY_STALL_SECONDS the relay may still connect"

    await asyncio.sleep(STALL)
    check = relay_runner.health()
    assert not check.ok
    assert "no relay cycle ended" in check.detail
    assert "cannot reach the broker (ConnectionRefusedError" in check.detail
    await relay_runner.stop()


@pytest.mark.parametrize("hangs", [False, True])
async def test_only_cycles_that_keep_ending_pass(tmp_path: Path, hangs: bool) -> None:
    relay_runner = runner(tmp_path, ReachableBroker())

    async def cycle() -> int:
        if hangs:
            await relay_runner.relay.stopped()
        return 0

    relay_runner.relay.step = cycle  # type: ignore[method-assign]  # the step of its run
    relay_runner.start()
    await asyncio.sleep(STALL * 2)

    check = relay_runner.health()
    if hangs:
        assert not check.ok and "no relay cycle ended for" in check.detail
    else:
        assert check.ok, check.detail
        assert relay_failed() == 0
    relay_runner.relay.stop()
    await relay_runner.stop()


async def test_a_relay_paused_on_its_database_names_the_failure(tmp_path: Path) -> None:
    """Stalled while it pauses on a database that does not answer, the check says what the
    relay met (its text scrubbed of passwords), not only how long no cycle ended; a cycle
    that ends forgets it. (A standalone relay's ``/ready`` said only "no relay cycle ended
    for 9s".)"""
    relay_runner = runner(tmp_path, ReachableBroker())
    failure = OSError("cannot reach postgresql://relay:s3cret@db:5432/orders")

    async def cycle() -> int:
        relay_runner._paused("claiming rows", failure, 0.05)
        await relay_runner.relay.stopped()
        return 0

    relay_runner.relay.step = cycle  # type: ignore[method-assign]  # the step of its run
    relay_runner.start()
    await asyncio.sleep(STALL * 2)

    check = relay_runner.health()
    assert not check.ok
    assert "no relay cycle ended for" in check.detail
    assert "it waits, paused on OSError: cannot reach postgresql://relay:" in check.detail
    assert "s3cret" not in check.detail
    relay_runner._progressed()
    assert "paused on" not in relay_runner.health().detail
    relay_runner.relay.stop()
    await relay_runner.stop()
