"""A revision the database refuses ends the worker in one line, with exit code 2.

Contract: a handler package whose migration the database refuses (here: a column of a
type that does not exist) is a mistake no retry gets past, not an outage. The worker
says so in one line that names the revision's file and line and the database's reason,
and exits with code 2, as for any mistake found at start; no traceback, no agent
"Crashed" line. (Each of the worker's agents crashed on it in turn, a traceback each,
about 900 lines, and the worker exited 1 without naming the file.)
"""

from __future__ import annotations

import pytest

from tests.integration.support.kafka import OrderTopic
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

REFUSED = "tests.integration.support.refused_migration"


async def test_the_worker_names_the_revision_and_exits_2(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    worker = workers.start(database_url, handler_modules=REFUSED)

    assert worker.exit_code(within=90) == 2, worker.tail()
    log = worker.log()
    (line,) = [text for text in log.splitlines() if "configuration error" in text]
    assert "[ERROR]" in line, line
    assert "refused_migration/migrations/0001_refused.py, line 15" in line, line
    assert 'type "no_such_type" does not exist' in line, line
    assert "Traceback" not in log, worker.tail()
    assert "Crashed" not in log, worker.tail()
    assert "We experienced a crash" not in log, worker.tail()
