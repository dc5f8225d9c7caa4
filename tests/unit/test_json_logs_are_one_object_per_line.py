"""``LOG_FORMAT=json`` writes one JSON object per line.

Contract: each line is a JSON object with ``ts`` (UTC ISO 8601), ``level``,
``logger`` and ``message``; eventId, traceId, consumer, outcome, partition and
offset appear when the call passed them with ``extra=`` and are absent
otherwise; a logged exception's traceback is in ``exc``, inside the same line.
``LOG_FORMAT=text`` (the default) leaves faust's logging alone, and an unknown
format is refused at start.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from app.logging_setup import JsonFormatter, faust_logging_config
from app.settings import Settings


def formatted(extra: dict[str, object] | None = None, exc_info: Any = None) -> dict[str, object]:
    logger = logging.getLogger("effectively_once.test")
    record = logger.makeRecord(
        logger.name, logging.INFO, __file__, 1, "batch %s done", ("b1",), exc_info, extra=extra
    )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = orjson.loads(line)
    assert isinstance(parsed, dict)
    return parsed


def test_the_base_fields_are_always_there() -> None:
    line = formatted()
    assert line["level"] == "INFO"
    assert line["logger"] == "effectively_once.test"
    assert line["message"] == "batch b1 done"
    assert str(line["ts"]).endswith("+00:00")
    assert not {"eventId", "consumer", "outcome", "partition", "offset"} & line.keys()


def test_context_passed_with_extra_becomes_fields() -> None:
    extra = {
        "eventId": "e1", "traceId": "t1", "consumer": "points-service",
        "outcome": "parked", "partition": 3, "offset": 42,
    }
    line = formatted(extra=extra)
    assert {key: line[key] for key in extra} == extra


def test_an_exception_stays_inside_the_line() -> None:
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        line = formatted(exc_info=sys.exc_info())
    assert "RuntimeError: boom" in str(line["exc"])


def test_text_keeps_fausts_logging_and_json_replaces_its_handler() -> None:
    assert faust_logging_config(Settings(log_format="text")) is None
    config = faust_logging_config(Settings(log_format="json"))
    assert config is not None and config["merge"] is True
    assert config["handlers"]["default"]["formatter"] == "json"
    factory = config["formatters"]["json"]["()"]
    module, _, name = factory.rpartition(".")
    assert getattr(importlib.import_module(module), name) is JsonFormatter


def test_an_unknown_format_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_FORMAT", "yaml")
    with pytest.raises(ValidationError, match="log_format"):
        Settings()
