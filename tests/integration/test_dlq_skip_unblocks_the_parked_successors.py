"""``python -m dlq skip`` gives up on a dead event so that its aggregate moves on.

Contract: ``skip --execute`` makes the dead event's consumer take its version
without running its handler (even a handler that would now succeed does not
run: its effect never appears), so the aggregate's parked successor applies.
The ``failed_event`` row records the decision (``--why``, and ``$USER`` as
``decided_by``) and ends ``skipped``. Without ``--execute`` nothing changes.
Poison without a readable envelope has no version to take and holds back nothing:
``skip`` publishes nothing for it and marks its row ``skipped``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.envelopes import Message
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE,
    DlqCommand,
    a_payment_dies,
    dead_letters,
    failures,
    produce,
)
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_skip_takes_the_version_without_the_handler_and_unparks(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    stream = topic.stream
    fixed = tmp_path / "fixed"
    death = await a_payment_dies(stream, workers, database_url, fixed)
    fixed.touch()  # from now on the handler would apply the payment, were it run
    dlq = DlqCommand(stream, database_url, user="night-shift")

    dry = await dlq("skip", death.position)
    assert dry.code == 0, dry.err
    assert "dry run: would skip 1 of 1 selected" in dry.out
    assert [row["status"] for row in await failures(database_url)] == ["dead"]

    done = await dlq("skip", death.position, "--execute", "--why", "refunded by hand")
    assert done.code == 0, done.err
    assert "selected 1: skipped 1, left alone 0, errors 0" in done.out

    balances = await eventually(
        db.balances,
        lambda b: f"{FAIL_USER}/cancelled" in b,
        what="the parked cancel to apply",
        within=30,
        workers=[death.worker],
    )
    assert balances == {"alice": 123, f"{FAIL_USER}/cancelled": 1}  # no payment for mallory
    assert await db.versions(death.order.order_id) == {PROBE: 3}
    assert await db.parked_count() == 0
    assert death.event_id in await db.consumed_ids(PROBE)
    assert await failures(database_url) == [
        {
            "consumer_group": PROBE,
            "event_id": death.event_id,
            "status": "skipped",
            "attempts": 3,
            "reason": "retries-exhausted",
            "decided_by": "night-shift",
            "decision_note": "refunded by hand",
        }
    ]

    await produce(stream, [Message(death.order.order_id.encode(), b"\xff not an event")])
    poison = (await dead_letters(stream, 2, [death.worker]))[-1]
    settled = await dlq("skip", f"{poison.partition}:{poison.offset}", "--execute")
    assert settled.code == 0, settled.out + settled.err
    assert "poison (undecodable) with no readable envelope: nothing to deliver" in settled.out
    assert [row["status"] for row in await failures(database_url)] == ["skipped", "skipped"]
