"""A row that can never be sent goes DEAD with a clear error; nothing else waits for it long.

Contract: a row whose payload is not JSON goes ``DEAD`` at its first attempt (no attempt
can mend its columns: before, it held its aggregate through ``RELAY_MAX_ATTEMPTS``
attempts and their back-off, minutes by default), and a row whose topic does not exist
fails ``RELAY_MAX_ATTEMPTS`` publishes and ends ``DEAD``, ``retry_count`` at the maximum
(the topic may come); each with ``last_error`` saying why; every other row ships, the dead row's
aggregate's later rows included, once it is dead (they waited for it, not more). This
relay creates no topic (built without a topic maker, as with ``TOPICS_DECLARE=false``).
The missing topic is named (for ``/ready``) while a row waits for it, and no longer once
none does. ``python -m app outbox list`` shows the dead rows, and ``requeue --execute`` puts one
back once its topic exists: it ships (an id no row has is said so, exit code 1). On each
database.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from app.demo.produce import ensure_topic
from app.outbox import NewEvent
from app.outbox import relay as relay_module
from app.pipeline.pause import Backoff
from tests.integration.support.databases import BACKENDS
from tests.integration.support.dlq import records
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import (
    app_command,
    insert_raw,
    relay_on,
    rows,
    shipped,
    until_idle,
    write,
)

pytestmark = pytest.mark.integration

ATTEMPTS = 3
QUICK = Backoff(0.05, 0.05)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_rows_that_cannot_be_sent_go_dead_and_the_rest_ships(
    topic: OrderTopic, migrated_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay_module, "MISSING_RECHECK_SECONDS", 0.0)
    stream = topic.stream
    missing = f"{stream.topic}-missing"

    def event(aggregate: str, version: int, to: str = stream.topic) -> NewEvent:
        return NewEvent(to, "Counted", "Counter", aggregate, {"n": version}, version)

    await write(migrated_database, [event("good", 1), event("good", 2)])
    await insert_raw(
        migrated_database,
        {
            "event_id": "not-json-1",
            "aggregate_type": "Counter",
            "aggregate_id": "broken",
            "event_type": "Counted",
            "topic": stream.topic,
            "payload": "{not json",
        },
    )
    await write(migrated_database, [event("broken", 2), event("lost", 1, to=missing)])

    async with relay_on(
        migrated_database, stream.broker_url, max_attempts=ATTEMPTS, attempt_backoff=QUICK
    ) as relay:
        for _ in range(ATTEMPTS):
            await until_idle(relay)
            await asyncio.sleep(0.1)  # the failed rows' next attempts fall due
        await until_idle(relay)

        columns = ("aggregate_id", "status", "retry_count", "last_error")
        found = {
            r["aggregate_id"]: r
            for r in await rows(migrated_database, *columns)
            if r["status"] != "PUBLISHED"
        }
        assert set(found) == {"broken", "lost"}
        assert (found["broken"]["status"], found["broken"]["retry_count"]) == ("DEAD", 1)
        assert (found["lost"]["status"], found["lost"]["retry_count"]) == ("DEAD", ATTEMPTS)
        assert found["broken"]["last_error"].startswith("payload is not JSON: ")
        assert found["lost"]["last_error"] == (
            f"topic {missing!r} does not exist on the broker "
            "(TOPICS_DECLARE=false: the relay creates no topic)"
        )
        on_topic = await shipped(stream, stream.topic)
        assert sorted((e["aggregateId"], e["aggregateVersion"]) for e in on_topic) == [
            ("broken", 2),
            ("good", 1),
            ("good", 2),
        ]
        assert await records(stream, missing) == []  # the relay created no topic
        # Named (``/ready``'s relay check) while its row waited; no longer once it is DEAD.
        assert set(relay.missing_topics) == {missing}
        await relay.recheck_missing()
        assert relay.missing_topics == {}

        env = {"DATABASE_URL": migrated_database}
        code, listed, _ = await app_command("outbox", "list", "--json", env=env)
        assert code == 0
        assert {r["aggregate_id"]: r["status"] for r in orjson.loads(listed)} == {
            "broken": "DEAD",
            "lost": "DEAD",
        }
        lost = found["lost"]["id"]
        await ensure_topic(stream.bootstrap, missing, 1)
        typo = await app_command("outbox", "requeue", "987654", "--execute", env=env)
        assert typo[0] == 1 and "no outbox row 987654" in typo[2], typo
        assert "left alone" not in typo[1], typo
        code, said, _ = await app_command("outbox", "requeue", str(lost), "--execute", env=env)
        assert code == 0, said
        await until_idle(relay)

    assert [e["aggregateId"] for e in await shipped(stream, missing)] == ["lost"]
    final = {(r["aggregate_id"], r["status"]) for r in await rows(migrated_database, *columns)}
    assert final == {
        ("good", "PUBLISHED"),
        ("broken", "DEAD"),
        ("broken", "PUBLISHED"),
        ("lost", "PUBLISHED"),
    }
