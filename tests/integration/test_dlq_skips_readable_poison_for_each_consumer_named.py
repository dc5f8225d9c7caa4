"""Poison whose envelope could be read no longer blocks its aggregate for good:
``python -m dlq skip --for-consumer`` lets each named consumer move on.

Contract: an event whose payload fails its schema (``invalid-schema``) but whose
envelope names its id, aggregate and version is dead-lettered once, for nobody,
and every consumer parks the aggregate's later versions behind it. ``skip``
refuses it without ``--for-consumer``, and for a consumer name the database never saw
(a typo, whose skip nobody would ever take). ``skip P:O --for-consumer C --execute`` makes C
(and only C) take the dead event's version without running a handler, so C's
parked successor applies while the other consumer still waits (``list --status dead``
shows the poison dead, naming the consumer that waits, though its row is ``skipped``);
naming the other one then unblocks it too. The poison's ``failed_event`` row records the
latest decision and is ``skipped`` once a consumer took a skip of it (retention
deletes it in time); nothing takes effect twice. Poison without a readable envelope
holds back nothing: its replay's dry run says the replay dead-letters it again, and
its skip publishes nothing and marks its row ``skipped`` with the decision, after
which a replay of every dead record leaves it alone.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from app.demo.envelopes import Message, encode
from tests.integration.support.dlq import DlqCommand, dead_letters, failures, produce
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

PROBE = "dlq-probe"
TALLY = "tally"
# The example package brings the user_points table both test consumers write.
MODULES = "handlers,tests.integration.support.dlq_probe,tests.integration.support.tally"


@pytest.fixture
def backend() -> str:
    return "sqlite"


async def test_readable_poison_is_skipped_for_each_consumer_named(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    stream = topic.stream
    worker = workers.start(
        database_url, handler_modules=MODULES, env={"CONSUMERS": f"{PROBE},{TALLY}"}
    )
    order = Order("bob", 2_500)
    created, cancelled = order.created(), order.cancelled()
    broken = order.paid()
    broken["data"] = {**broken["data"], "amount": "a lot"}  # the schema wants a number
    await produce(stream, [encode(created), encode(broken), encode(cancelled)])
    (poison,) = await dead_letters(stream, 1, [worker])
    position = f"{poison.partition}:{poison.offset}"
    await eventually(
        db.parked_count,
        lambda parked: parked == 2,
        what="both consumers to park the cancel",
        within=30,
        workers=[worker],
    )
    dlq = DlqCommand(stream, database_url, user="night-shift")

    refused = await dlq("skip", position, "--execute")
    assert refused.code == 2, refused.out + refused.err
    assert "--for-consumer" in refused.out
    typo = await dlq("skip", position, "--for-consumer", "dlq-prbe", "--execute")
    assert typo.code == 2, typo.out + typo.err
    assert "--for-consumer 'dlq-prbe': no consumer of that name" in typo.out + typo.err

    done = await dlq(
        "skip", position, "--for-consumer", PROBE, "--execute", "--why", "garbled upstream"
    )
    assert done.code == 0, done.out + done.err
    assert f"for {PROBE}" in done.out

    await eventually(
        lambda: db.versions(order.order_id),
        lambda v: v.get(PROBE) == 3,
        what=f"{PROBE} to take the dead version and apply the cancel",
        within=30,
        workers=[worker],
    )
    assert (await db.versions(order.order_id))[TALLY] == 1
    assert await db.parked_count() == 1  # the tally still waits
    assert (await db.balances())["bob/cancelled"] == 1
    listed = await dlq("list", "--status", "dead", "--json")
    assert listed.code == 0, listed.out + listed.err
    (row,) = orjson.loads(listed.out)
    assert (row["position"], row["status"], row["waiting"]) == (position, "dead", [TALLY])
    table = await dlq("list", "--status", "dead")
    assert f"(skipped for some; {TALLY} wait)" in table.out, table.out

    done = await dlq("skip", position, "--for-consumer", TALLY, "--execute", "--why", "also")
    assert done.code == 0, done.out + done.err
    await eventually(
        db.parked_count,
        lambda parked: parked == 0,
        what="the tally to move on too",
        within=30,
        workers=[worker],
    )
    assert await db.versions(order.order_id) == {PROBE: 3, TALLY: 3}
    nothing_dead = await dlq("list", "--status", "dead")
    assert nothing_dead.code == 1, nothing_dead.out + nothing_dead.err
    assert await db.tallies() == {created["eventId"]: 1, cancelled["eventId"]: 1}
    assert [(row["consumer_group"], row["status"], row["decided_by"], row["decision_note"])
            for row in await failures(database_url)] == [
        ("", "skipped", "night-shift", "also")
    ]  # fmt: skip

    await produce(stream, [Message(order.order_id.encode(), b"\xff not an event")])
    unreadable = (await dead_letters(stream, 2, [worker]))[-1]
    where = f"{unreadable.partition}:{unreadable.offset}"
    replaying = await dlq("replay", where)
    assert replaying.code == 0, replaying.out
    assert f"note {where}: poison (undecodable) with no readable envelope" in replaying.out
    settled = await dlq("skip", where, "--execute", "--why", "garbage")
    assert settled.code == 0, settled.out + settled.err
    assert f"skipped {where} (poison): nothing published, its row marked skipped" in settled.out
    assert (await failures(database_url))[-1] == {
        "consumer_group": "",
        "event_id": None,
        "status": "skipped",
        "attempts": 1,
        "reason": "undecodable",
        "decided_by": "night-shift",
        "decision_note": "garbage",
    }
    again = await dlq("replay", "--status", "dead", "--execute")  # settled: no longer dead
    assert (again.code, again.out) == (1, ""), again.err
    assert "matches status=dead" in again.err
    assert orjson.loads(poison.value or b"{}")["eventId"] == broken["eventId"]
