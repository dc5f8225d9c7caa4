"""``python -m dlq`` says in one line what stops it, with exit code 2 (1: nothing matched).

Contract: an unreachable broker ("cannot reach the broker at host:port: why"),
an unreachable database, a missing SQLite file and a database the workers
never migrated are each one line on stderr, exit code 2, no traceback, and
never a password. A missing dead-letter topic (with a database that holds no
record that never reached it), a filter that matches nothing and a position
with no record are one line with exit code 1; ``list --json`` still prints a
JSON array (empty).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from app.db.migrate import upgrade_to_head
from app.demo.broker import free_port
from app.demo.produce import ensure_topic
from dlq import headers as h
from dlq.topics import dlt_topic
from tests.integration.support.dlq import DlqCommand, Ran
from tests.integration.support.workers import Stream

pytestmark = pytest.mark.integration


def one_line(ran: Ran, code: int, starts: str) -> None:
    assert ran.code == code, ran
    assert len(ran.err.splitlines()) == 1, ran.err
    assert ran.err.startswith(starts), ran.err
    assert "Traceback" not in ran.err + ran.out


async def test_each_obstacle_is_one_line_with_its_exit_code(stream: Stream, tmp_path: Path) -> None:
    database = tmp_path / "eo.db"
    url = f"sqlite+aiosqlite:///{database}"
    dlq = DlqCommand(stream, url)
    port = free_port()

    broker_down = await dlq("list", env={"BROKER_URL": f"kafka://127.0.0.1:{port}"})
    one_line(broker_down, 2, f"error: cannot reach the broker at 127.0.0.1:{port}: ")
    # A missing DLT still needs the database: records that never reached it are there.
    one_line(await dlq("list"), 2, f"error: cannot reach the database at {url}: no such file")
    sqlite3.connect(database).close()
    one_line(await dlq("list"), 2, f"error: the database at {url} has no failed_event table")
    await upgrade_to_head(url)
    one_line(await dlq("list"), 1, f"no topic {dlt_topic(stream.topic)} on the broker")

    await _one_dead_letter(stream)
    secret = f"postgresql://eo:s3cret@127.0.0.1:{port}/eo"
    db_down = await dlq("replay", "0:0", env={"DATABASE_URL": secret})
    one_line(db_down, 2, "error: cannot reach the database at postgresql+asyncpg://eo:***@")
    assert "s3cret" not in db_down.err

    listed = await dlq("list", "--json")
    assert listed.code == 0 and [row["status"] for row in listed.json()] == ["unknown"]
    no_match = await dlq("list", "--json", "--event-id", "nope")
    one_line(no_match, 1, f"no record of {dlt_topic(stream.topic)} matches event-id=nope")
    assert no_match.json() == []
    one_line(await dlq("show", "0:99"), 1, f"no record at 0:99 in {dlt_topic(stream.topic)}")


async def _one_dead_letter(stream: Stream) -> None:
    dlt = dlt_topic(stream.topic)
    await ensure_topic(stream.bootstrap, dlt, 1)
    producer = AIOKafkaProducer(bootstrap_servers=stream.bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(dlt, b"{}", key=b"k", headers=[(h.DLT_REASON, b"undecodable")])
    finally:
        await producer.stop()
