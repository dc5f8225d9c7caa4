"""PostgreSQL bulk statements carry a batch's rows in one parameter, built without I/O.

- a table without binary columns gets the rows as one JSON text (``json_populate_recordset``);
  a ``Decimal`` keeps its exact digits, an aware datetime its offset;
- a table with a binary column (JSON has no bytes) gets one array per column (``unnest``);
- a value JSON cannot carry faithfully is refused, never turned into some text;
- the statements are compiled once per table and column set.
The statements' effects on a real PostgreSQL are covered by the example handlers' and the
core contract's integration tests.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import orjson
import pytest
from sqlalchemy.dialects import postgresql

from app.db import bulk
from app.db.tables import consumed_event, parked_event

AT = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)


def test_rows_of_a_table_without_binary_columns_travel_as_one_json_text() -> None:
    rows = [
        {"event_id": "e-1", "consumer_group": "c", "aggregate_version": 3, "applied_at": AT},
        {"event_id": "e-2", "consumer_group": "c", "aggregate_version": None, "applied_at": AT},
    ]

    params = bulk.params(consumed_event, rows)

    assert list(params) == ["u_rows"]
    assert orjson.loads(params["u_rows"]) == [
        {"event_id": "e-1", "consumer_group": "c", "aggregate_version": 3,
         "applied_at": "2026-12-02T15:00:00+00:00"},
        {"event_id": "e-2", "consumer_group": "c", "aggregate_version": None,
         "applied_at": "2026-12-02T15:00:00+00:00"},
    ]  # fmt: skip
    sql = str(
        bulk.insert(consumed_event, bulk.columns_of(rows)).compile(dialect=postgresql.dialect())
    )
    assert 'json_populate_recordset(NULL::"consumed_event"' in sql


def test_a_decimal_keeps_its_digits() -> None:
    params = bulk.params(consumed_event, [{"event_id": "e-1", "amount": Decimal("476.20")}])

    assert orjson.loads(params["u_rows"]) == [{"event_id": "e-1", "amount": "476.20"}]


def test_a_value_json_cannot_carry_is_refused() -> None:
    with pytest.raises(TypeError, match="bytes"):
        bulk.params(consumed_event, [{"event_id": "e-1", "event_type": b"\x00"}])


def test_rows_of_a_table_with_a_binary_column_travel_as_arrays() -> None:
    rows = [
        {"event_id": "e-1", "record_value": b"\x00\x01"},
        {"event_id": "e-2", "record_value": b"{}"},
    ]

    params = bulk.params(parked_event, rows)

    assert params == {"u_event_id": ["e-1", "e-2"], "u_record_value": [b"\x00\x01", b"{}"]}
    sql = str(
        bulk.insert(parked_event, bulk.columns_of(rows)).compile(dialect=postgresql.dialect())
    )
    assert "unnest(" in sql


def test_statements_are_built_once_per_table_and_columns() -> None:
    columns = ("event_id", "consumer_group")

    assert bulk.insert(consumed_event, columns) is bulk.insert(consumed_event, columns)
    assert bulk.insert(consumed_event, columns) is not bulk.insert(
        consumed_event, columns, bulk.IGNORE
    )
