"""Two services reading one topic, each with a consumer of the same name, share the topic's
retry tiers and DLT, and each acts on its own failures only.

Contract: billing and shipping (two ``APP_ID``s, two databases) both run ``dlq-probe``,
which fails mallory's payment in both: each service dead-letters it once, its DLT record
naming its deployment (``dlt-app-id``). Billing's ``python -m dlq list`` (with billing's
``APP_ID``) shows billing's record and says the other was left out, naming shipping's
``APP_ID``; without ``APP_ID`` a skip of both is refused; billing's skip of
it lets billing's probe take the version and apply the parked cancel, while shipping's
probe, reading the same skip record, takes nothing: its version stays at 1, its cancel
parked, its failure ``dead`` (a skip aimed at a consumer name made every service's
consumer of that name skip).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from app.demo.envelopes import encode
from dlq.dead import DeadLetter
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE,
    PROBE_MODULES,
    DlqCommand,
    caught_up,
    dead_letters,
    failures,
    probe_env,
    produce,
)
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def test_a_skip_by_one_service_leaves_the_others_consumer_of_that_name_alone(
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    db: Database,
    make_database: Callable[[str], Awaitable[str]],
    tmp_path: Path,
) -> None:
    billing = topic.stream
    shipping = replace(billing, app_id=f"{billing.app_id}-shipping")
    shipping_url = await make_database("postgresql")
    env = probe_env(tmp_path / "never-fixed")
    running = [
        workers.start(database_url, handler_modules=PROBE_MODULES, env=env),
        workers.start(
            shipping_url, handler_modules=PROBE_MODULES, env={**env, "APP_ID": shipping.app_id}
        ),
    ]
    mallory = Order(FAIL_USER, 4_200)
    paid = mallory.paid()
    await produce(billing, [encode(mallory.created()), encode(paid), encode(mallory.cancelled())])

    letters = [DeadLetter.of(r) for r in await dead_letters(billing, 2, running)]
    assert sorted(d.app_id or "" for d in letters) == sorted([billing.app_id, shipping.app_id])
    dlq = DlqCommand(billing, database_url)
    as_billing = {"APP_ID": billing.app_id}
    listed = await dlq("list", "--json", env=as_billing)
    assert [row["app_id"] for row in listed.json()] == [billing.app_id], listed.out
    assert f"1 record(s) of other deployments (APP_ID {shipping.app_id}: 1)" in listed.err
    # Not told whose it is, the command shows both and acts on neither at once.
    both = await dlq("list", "--json")
    assert sorted(row["app_id"] for row in both.json()) == sorted([billing.app_id, shipping.app_id])
    assert "records of several deployments" in both.err
    mixed = await dlq("skip", "--event-id", paid["eventId"], "--execute")
    assert mixed.code == 2, mixed.out + mixed.err
    assert "several deployments" in mixed.err

    skip = ("skip", "--event-id", paid["eventId"], "--execute", "--why", "voided")
    done = await dlq(*skip, env=as_billing)
    assert done.code == 0, done.out + done.err
    await eventually(
        db.balances,
        lambda balances: balances.get(f"{FAIL_USER}/cancelled") == 1,
        what="billing's probe to take the skip and apply the parked cancel",
        within=30,
        workers=running,
    )
    await caught_up(shipping, running)  # shipping has read the skip record too

    theirs = Database(shipping_url)
    try:
        assert await theirs.versions(mallory.order_id) == {PROBE: 1}
        assert await theirs.parked_count() == 1
        assert await theirs.balances() == {}
    finally:
        await theirs.dispose()
    assert [row["status"] for row in await failures(shipping_url)] == ["dead"]
    assert [row["status"] for row in await failures(database_url)] == ["skipped"]
