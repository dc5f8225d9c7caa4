"""A relay whose database role may not touch the outbox stops in one line naming the grant.

Contract: ``python -m app relay`` logged in as a role the database refuses the outbox to
(no grant on ``outbox_event``) exits with code 2 and one ERROR line saying the database
refuses the login, the database's own reason and the grants to add (SELECT and UPDATE on
``outbox_event``), with no traceback; with exactly those grants it publishes the rows. A
role that may read the outbox but not update it is named at start, before any row (it
ran, ``/ready`` green, until its first row). Before, the refusal ended it with the
traceback of a bug.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import rows
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration


@dataclass
class Role:
    """A login role of its own on the migrated database, and an admin connection to grant it."""

    name: str
    url: str
    admin: asyncpg.Connection


@pytest.fixture
async def role(migrated_database: str) -> AsyncIterator[Role]:
    url = make_url(migrated_database)
    name = f"relay_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        await admin.execute(f"CREATE ROLE {name} LOGIN")
        yield Role(name, url.set(username=name).render_as_string(hide_password=False), admin)
    finally:
        await admin.execute(f"DROP OWNED BY {name}")
        await admin.execute(f"DROP ROLE {name}")
        await admin.close()


def refused_in_one_line(relays: Relays, role: Role, topic: OrderTopic) -> str:
    """The relay started as ``role`` exits 2; its one line saying why."""
    refused = relays.start(role.url, topic.stream.broker_url)
    code = refused.exit_code(within=60)
    log = refused.log()
    assert code == 2, log
    [line] = [text for text in log.splitlines() if "the relay cannot run" in text]
    assert "the database refuses this login" in line, line
    assert "permission denied" in line and "SELECT and UPDATE on outbox_event" in line
    assert "Traceback" not in log, log
    return line


async def test_a_role_without_grants_is_named_and_one_with_them_publishes(
    migrated_database: str, topic: OrderTopic, role: Role, tmp_path: Path
) -> None:
    await role.admin.execute(
        "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
        "topic, payload) VALUES ('e-1', 'Order', 'o-1', 'OrderPaid', $1, '{}')",
        topic.stream.topic,
    )
    relays = Relays(tmp_path / "relays")
    try:
        refused_in_one_line(relays, role, topic)

        await role.admin.execute(f"GRANT SELECT, UPDATE ON outbox_event TO {role.name}")
        granted = relays.start(role.url, topic.stream.broker_url)
        await eventually(
            lambda: rows(migrated_database, "status"),
            lambda found: [r["status"] for r in found] == ["PUBLISHED"],
            what="the row published by the role with its grants",
            within=60,
        )
        assert granted.stop() == 0
    finally:
        relays.kill_all()


async def test_a_role_that_may_read_but_not_update_is_named_before_any_row(
    topic: OrderTopic, role: Role, tmp_path: Path
) -> None:
    """With SELECT alone and an empty outbox it ran, ``/ready`` green, until its first row."""
    await role.admin.execute(f"GRANT SELECT ON outbox_event TO {role.name}")
    relays = Relays(tmp_path / "relays")
    try:
        refused_in_one_line(relays, role, topic)
    finally:
        relays.kill_all()
