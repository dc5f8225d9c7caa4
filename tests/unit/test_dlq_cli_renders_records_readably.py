"""``list`` and ``show`` render what an operator needs, in full.

Contract: the table has one row per record naming its DLT ``p:o`` (what ``show`` takes),
event id, type, aggregate (``type:id@version``, as ``release --aggregate`` takes it),
consumer (or ``(poison)``), reason, attempts, last failure (UTC) and status, and marks
older copies of a failure; a plan that acts on poison for named consumers has a ``for``
column naming the consumer of each of its rows (no copies of each other); ``--json``
rows carry every parsed header, the status and decision, and ``older_copy``; ``show``
prints every header and the payload, pretty when it is JSON, else the ``repr`` of its
bytes.
"""

from __future__ import annotations

import json

from rich.console import Console, RenderableType

from dlq import render
from dlq.actions import Action, plan
from dlq.policy import DeadReason
from tests.dlq_letters import entry, letter


def text(renderable: RenderableType) -> str:
    console = Console(width=250, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_table_names_each_record_by_its_dlt_position() -> None:
    rows = [
        entry(
            letter(4, dlt_partition=1, event_id="e-42", aggregate="order-9", version=3, minutes=75)
        ),
        entry(letter(5, consumer=None, reason=DeadReason.UNDECODABLE, attempts=1), "unknown"),
    ]

    lines = text(render.table(rows)).splitlines()

    first = next(line for line in lines if "1:4" in line).split()
    assert first == [
        "1:4",
        "e-42",
        "OrderPaid",
        "Order:order-9@3",
        "points-service",
        "retries-exhausted",
        "3",
        "2024-05-01",
        "11:15:00",
        "dead",
    ]
    poison = next(line for line in lines if "0:5" in line).split()
    assert poison == [
        "0:5",
        "-",
        "-",
        "-",
        "(poison)",
        "undecodable",
        "1",
        "2024-05-01",
        "10:00:00",
        "unknown",
    ]


def test_a_plan_for_named_consumers_names_the_consumer_of_each_row() -> None:
    poison = letter(5, consumer=None, reason=DeadReason.INVALID_SCHEMA, attempts=1, readable=True)
    todo = plan([entry(poison)], Action.SKIP, for_consumers=("points", "tally"))

    lines = text(render.table(todo.act)).splitlines()

    assert next(line for line in lines if "DLT" in line).split() == [
        "DLT",
        "event",
        "id",
        "type",
        "aggregate",
        "consumer",
        "for",
        "reason",
        "tries",
        "last",
        "failure",
        "(UTC)",
        "status",
    ]
    rows = [line.split() for line in lines if "0:5" in line]
    assert [row[4:7] for row in rows] == [  # after the event id, type and aggregate
        ["(poison)", "points", "invalid-schema"],
        ["(poison)", "tally", "invalid-schema"],
    ]
    assert not any("older copy" in line for line in lines)  # one record, for two consumers


def test_older_copies_are_marked() -> None:
    rows = [entry(letter(0, minutes=0)), entry(letter(1, minutes=5, replay_count=1))]

    lines = text(render.table(rows)).splitlines()
    parsed = json.loads(render.rows_json(rows))

    assert "older copy" in next(line for line in lines if "0:0" in line)
    assert "older copy" not in next(line for line in lines if "0:1" in line)
    assert [row["older_copy"] for row in parsed] == [True, False]


def test_json_rows_carry_every_header_and_the_decision() -> None:
    (row,) = json.loads(render.rows_json([entry(letter(2, original=(3, 8)), "replayed", "ops")]))

    assert row == {
        "position": "0:2",
        "dlt_topic": "orders.DLT",
        "dlt_partition": 0,
        "dlt_offset": 2,
        "original_topic": "orders",
        "original_partition": 3,
        "original_offset": 8,
        "consumer": "points-service",
        "reason": "retries-exhausted",
        "exception_type": "builtins.RuntimeError",
        "exception_message": "boom",
        "attempts": 3,
        "first_failure_at": "2024-05-01T10:00:00.000Z",
        "last_failure_at": "2024-05-01T10:00:00.000Z",
        "event_id": "e-1",
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": "order-1",
        "aggregate_version": 2,
        "replay_count": 0,
        "status": "replayed",
        "decided_by": "ops",
        "decision_note": None,
        "older_copy": False,
        "waiting": [],
        "app_id": None,
        "unpublished": None,
    }


def test_show_prints_every_header_and_a_pretty_json_payload() -> None:
    dead = letter(2, value=b'{"eventId":"e-1","data":{"amount":12.5}}')

    shown = text(render.show(entry(dead, "dead", "ops")))

    for name, value in dead.record.headers:
        if name != "dlt-exception-stacktrace":  # multi-line; its first line is enough
            assert f"{name}" in shown and value.decode() in shown
    assert "Traceback" in shown or "RuntimeError: boom" in shown
    assert '  "eventId": "e-1",' in shown
    assert '    "amount": 12.5' in shown
    assert "status dead  (ops)" in shown


def test_show_prints_bytes_that_are_not_json_as_their_repr() -> None:
    shown = text(render.show(entry(letter(0, value=b"\xff\xfe not json"), "dead")))

    assert repr(b"\xff\xfe not json") in shown
