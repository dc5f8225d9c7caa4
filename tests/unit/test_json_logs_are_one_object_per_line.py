"""``LOG_FORMAT=json`` writes one JSON object per line.

Contract: each line is a JSON object with ``ts`` (UTC ISO 8601), ``level``,
``logger`` and ``message``; eventId, traceId, consumer, outcome, partition and
offset appear when the call passed them with ``extra=`` and are absent
otherwise; a logged exception's traceback is in ``exc``, inside the same line
(and no ``exc`` when there is no exception). In a worker, what is written to stdout
or stderr becomes records too, one per line, and a traceback written there is one
record, its text in ``exc``, as is an exception that ends a thread (faust's
``FileLogProxy`` made one record of each ``write``, and the thread hook writes a
traceback token by token). ``LOG_FORMAT=text`` (the default) leaves faust's logging
alone, and an unknown format is refused at start.
"""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
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
        "eventId": "e1",
        "traceId": "t1",
        "consumer": "points-service",
        "outcome": "parked",
        "partition": 3,
        "offset": 42,
    }
    line = formatted(extra=extra)
    assert {key: line[key] for key in extra} == extra


def test_an_exception_stays_inside_the_line() -> None:
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        line = formatted(exc_info=sys.exc_info())
    assert "RuntimeError: boom" in str(line["exc"])


def test_no_exception_means_no_exc_field() -> None:
    assert "exc" not in formatted(exc_info=(None, None, None))


# What ``faust worker`` does with the app's settings, in its order: the app's
# ``on_worker_init`` signal, logging set up from ``logging_config``, then stdout and
# stderr redirected into logging when ``worker_redirect_stdouts`` says so.
WORKER = textwrap.dedent(
    """
    import sys, threading, traceback
    from mode.utils import logging as mode_logging
    from app.registry import Registry
    from app.runtime.faust_app import create_app
    from app.settings import Settings

    app = create_app(Settings(log_format="json"), Registry())
    app.on_worker_init.send()
    mode_logging.setup_logging(loglevel="info", logging_config=app.conf.logging_config)
    if app.conf.worker_redirect_stdouts:
        level = app.conf.worker_redirect_stdouts_level or "INFO"
        redirected = mode_logging.redirect_stdouts(severity=level)
        redirected.__enter__()  # kept referenced: the worker holds it while it runs

    def lookup():
        return {}["missing-key"]

    try:
        lookup()
    except KeyError:
        traceback.print_exc()

    def crash():
        raise RuntimeError("the consumer thread broke")

    thread = threading.Thread(target=crash, name="consumer-thread")
    thread.start()
    thread.join()
    print("a", "plain", "line")
    sys.stdout.flush()
    """
)


def test_a_workers_tracebacks_on_its_standard_streams_are_one_record_each() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WORKER],  # -c: this checkout's packages come first
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    objects = [orjson.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(obj, dict) for obj in objects)

    [printed] = [obj for obj in objects if "missing-key" in orjson.dumps(obj).decode()]
    assert "Traceback (most recent call last):" in printed["exc"]
    assert "in lookup" in printed["exc"] and "KeyError: 'missing-key'" in printed["exc"]
    [ended] = [obj for obj in objects if "the consumer thread broke" in orjson.dumps(obj).decode()]
    assert "consumer-thread" in ended["message"]
    assert "RuntimeError: the consumer thread broke" in ended["exc"]
    assert "in crash" in ended["exc"]
    assert [obj["message"] for obj in objects if "plain" in obj["message"]] == ["a plain line"]


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
