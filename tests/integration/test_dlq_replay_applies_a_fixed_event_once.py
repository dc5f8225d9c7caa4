"""``python -m dlq replay`` brings a dead event back once its handler is fixed, and only once.

Contract: ``replay`` without ``--execute`` publishes nothing and changes no
status. Replayed too early, the event dies again: a second DLT copy with
``dlt-replay-count: 1``, the first listed as an older copy. After the handler
is fixed, ``replay --execute`` publishes the newest copy only and applies the dead
event for its consumer (its parked successor then applies too, in order),
the ``failed_event`` row ends ``resolved`` with the operator's name and note.
A second ``replay`` leaves the resolved record alone (its dry run says there is
nothing to replay, not "replayed 0"), and even a
forced one (published again, and said to be a duplicate for its consumer) changes
nothing, not even the row: the effect is applied once. The worker's
``effectively_once_replays_total`` for the consumer counts the one replay that applied:
not the one that died again, nor the forced duplicate.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dlq import headers as h
from dlq.topics import dlt_topic
from tests.integration.support.dlq import (
    FAIL_USER,
    PROBE,
    DlqCommand,
    a_payment_dies,
    caught_up,
    dead_letters,
    failures,
    records,
)
from tests.integration.support.http import sample
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_replay_after_the_fix_applies_once_however_often_it_runs(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    stream = topic.stream
    fixed = tmp_path / "fixed"
    death = await a_payment_dies(stream, workers, database_url, fixed)

    async def replays() -> float | None:
        return await sample(death.worker, "effectively_once_replays_total", consumer=PROBE)

    assert await replays() == 0
    dlq = DlqCommand(stream, database_url)
    on_main = len(await records(stream, stream.topic))

    dry = await dlq("replay", "--event-id", death.event_id)
    assert dry.code == 0, dry.err
    assert "dry run: would replay 1 of 1 selected" in dry.out
    assert len(await records(stream, stream.topic)) == on_main
    assert [row["status"] for row in await failures(database_url)] == ["dead"]

    too_early = await dlq("replay", death.position, "--execute")
    assert too_early.code == 0, too_early.err
    (_, again_dead) = await dead_letters(stream, 2, [death.worker])
    assert again_dead.header(h.DLT_REPLAY_COUNT) == b"1"
    listed = (await dlq("list", "--json")).json()
    assert [(r["replay_count"], r["older_copy"], r["status"]) for r in listed] == [
        (0, True, "dead"),
        (1, False, "dead"),
    ]
    assert await replays() == 0

    fixed.touch()
    done = await dlq(
        "replay",
        "--event-id",
        death.event_id,
        "--execute",
        "--by",
        "alice-ops",
        "--reason-note",
        "fixed in 1.2.3",
    )
    assert done.code == 0, done.err
    assert f"replayed {again_dead.partition}:{again_dead.offset}" in done.out
    assert "selected 2: replayed 1, left alone 1 (older copy 1), errors 0" in done.out

    balances = await eventually(
        db.balances,
        lambda b: f"{FAIL_USER}/cancelled" in b,
        what="the parked cancel to apply",
        within=30,
        workers=[death.worker],
    )
    assert balances == {"alice": 123, FAIL_USER: 50, f"{FAIL_USER}/cancelled": 1}
    assert await db.versions(death.order.order_id) == {PROBE: 3}
    assert await db.parked_count() == 0
    resolved = {
        "consumer_group": PROBE,
        "event_id": death.event_id,
        "status": "resolved",
        "attempts": 3,
        "reason": "retries-exhausted",
        "decided_by": "alice-ops",
        "decision_note": "fixed in 1.2.3",
    }
    assert await failures(database_url) == [resolved]
    # Counted once the batch is done, a moment after its commit.
    await eventually(replays, lambda n: n == 1, what="the replay to be counted", within=10)

    dry_again = await dlq("replay", "--event-id", death.event_id)
    assert dry_again.code == 0, dry_again.err
    assert (
        "dry run: nothing to replay of 2 selected, left alone 2 (resolved 1, older copy 1)"
        in dry_again.out
    ), dry_again.out
    assert "replayed 0" not in dry_again.out
    again = await dlq("replay", "--event-id", death.event_id, "--execute")
    assert again.code == 0, again.err
    assert "selected 2: replayed 0, left alone 2 (resolved 1, older copy 1), errors 0" in again.out
    assert len(await records(stream, stream.topic)) == on_main + 2

    forced = await dlq("replay", "--event-id", death.event_id, "--execute", "--force")
    assert forced.code == 0, forced.err
    assert "replayed 1" in forced.out
    assert "(resolved already, --force: a duplicate for its consumer" in forced.out, forced.out
    assert len(await records(stream, stream.topic)) == on_main + 3
    await caught_up(stream, [death.worker])

    main = await records(stream, stream.topic)
    assert await db.balances() == balances
    assert await db.consumed_ids(PROBE) == sorted({orjson.loads(r.value)["eventId"] for r in main})
    assert await failures(database_url) == [resolved]
    assert await records(stream, dlt_topic(stream.topic)) == [death.dead, again_dead]
    assert await replays() == 1
