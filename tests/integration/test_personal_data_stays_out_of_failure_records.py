"""Personal data in a failing statement reaches no failure record.

Contract: a handler whose statement breaks a unique key with an e-mail address and a card
number as its bound parameters sends its event to the DLT, and neither value appears in
the DLT record's headers, its ``failed_event`` row, the worker's log or ``python -m dlq
show``: with ``FAILURE_DETAIL`` unset (``message``: the exception's type and message, no
stack trace) and with ``full`` (the stack trace too), on PostgreSQL (whose error names the
key's value in its DETAIL) and on MariaDB (whose message quotes it). With ``type`` only
the exception's class travels: no message and no stack trace, in the headers, the row or
the log.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.demo.envelopes import encode
from dlq import headers as h
from tests.integration.support.dlq import DlqCommand, dead_letters, failed_rows, produce
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.pii_probe import CARD, CONSUMER, EMAIL, MODULES
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import WorkerProcess, Workers

pytestmark = pytest.mark.integration

PERSONAL = (EMAIL, CARD)
ERROR_TYPE = "sqlalchemy.exc.IntegrityError"
# The database's own words for the broken key, without the key's value.
REFUSAL = {"postgresql": "violates unique constraint", "mariadb": "Duplicate entry"}


@pytest.mark.parametrize(
    ("backend", "detail"),
    [("postgresql", None), ("postgresql", "full"), ("postgresql", "type"), ("mariadb", "full")],
)
async def test_no_failure_record_carries_the_statements_parameters(
    topic: OrderTopic, workers: Workers, database_url: str, backend: str, detail: str | None
) -> None:
    stream = topic.stream
    env = {"CONSUMERS": CONSUMER, "RETRY_DELAYS": ""}
    if detail is not None:
        env["FAILURE_DETAIL"] = detail
    worker = workers.start(database_url, handler_modules=MODULES, env=env)
    order = Order("u-1", 5_000)
    await produce(stream, [encode(order.created()), encode(order.paid())])
    (dead,) = await dead_letters(stream, 1, [worker])
    await _logged_dead_letter(worker)

    headers = {name: value.decode("utf-8", "replace") for name, value in dead.headers}
    (row,) = await failed_rows(database_url)
    log = worker.log()
    shown = await DlqCommand(stream, database_url)("show", f"{dead.partition}:{dead.offset}")
    assert shown.code == 0, shown.err
    for place, text in [
        ("the DLT record's headers", repr(headers)),
        ("the failed_event row", repr(row)),
        ("the worker's log", log),
        ("dlq show", shown.out),
    ]:
        found = [value for value in PERSONAL if value in text]
        assert not found, f"{place} carries {found}"

    assert headers[h.DLT_EXCEPTION_TYPE] == row["exception_type"] == ERROR_TYPE
    mode = detail or "message"
    if mode == "type":
        assert not {h.DLT_EXCEPTION_MESSAGE, h.DLT_EXCEPTION_STACKTRACE} & headers.keys()
        assert row["exception_message"] == ""
        assert REFUSAL[backend] not in log and "Traceback" not in log
        return
    assert REFUSAL[backend] in headers[h.DLT_EXCEPTION_MESSAGE]
    assert REFUSAL[backend] in row["exception_message"] and REFUSAL[backend] in log
    if mode == "message":
        assert h.DLT_EXCEPTION_STACKTRACE not in headers and "Traceback" not in log
    else:
        trace = headers[h.DLT_EXCEPTION_STACKTRACE]
        assert trace.startswith(("Traceback", "...\n")) and ERROR_TYPE in trace  # the end kept
        assert "Traceback" in log and "dlt-exception-stacktrace" in shown.out


async def _logged_dead_letter(worker: WorkerProcess) -> None:
    async def log() -> str:
        return worker.log()

    def done(text: Any) -> bool:
        return f"dead-lettered for {CONSUMER}" in text

    await eventually(log, done, what="the dead letter's log line", within=30, workers=[worker])
