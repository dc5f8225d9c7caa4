"""``LOG_FORMAT=json``: one JSON object per log line, for log pipelines that parse fields.

Every line has ``ts`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``;
the fields in ``CONTEXT_FIELDS`` are added when the call passed them with
``extra=`` (``log.info("...", extra={"eventId": ..., "consumer": ...})``), and
``exc`` holds the traceback of a logged exception. ``LOG_FORMAT=text`` (the
default) keeps faust's human-readable lines. In a JSON worker, stdout and stderr
are logged too, a traceback written there as one record (``app.logging_streams``).

faust configures logging itself when the worker starts; ``faust_logging_config``
is the dictConfig handed to it (the App's ``logging_config`` setting), merged
over faust's own so the level given by ``faust worker -l`` still applies.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

from app.settings import Settings

TEXT_FORMAT = "[%(asctime)s] [%(levelname)s] %(name)s: %(message)s"
CONTEXT_FIELDS = (
    "eventId",
    "traceId",
    "consumer",
    "outcome",
    "eventType",
    "topic",
    "partition",
    "offset",
    "count",
)


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": _message(record),
        }
        for name in CONTEXT_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


def faust_logging_config(settings: Settings) -> dict[str, Any] | None:
    """The ``logging_config`` for the faust App: ``None`` keeps faust's text lines."""
    if settings.log_format != "json":
        return None
    return {
        "version": 1,
        "merge": True,  # keep faust's root logger and its level; replace its handler
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        # The real stderr: sys.stderr itself is logged (``worker_logging_options``).
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.__stderr__",
            }
        },
    }


def worker_logging_options(settings: Settings) -> dict[str, Any]:
    """The faust App's logging settings. JSON: faust's redirection of stdout and stderr
    (a record per ``write``) gives way to ``app.logging_streams``, installed when the
    worker starts (``on_worker_init``)."""
    return {
        "logging_config": faust_logging_config(settings),
        "worker_redirect_stdouts": settings.log_format != "json",
    }


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # a caller's bad format arguments must not lose the line
        return f"{record.msg!r} % {record.args!r}"


def configure_process_logging(settings: Settings, level: int = logging.INFO) -> None:
    """Logging for a process faust does not run (the relay): one line per event, text or JSON.

    aiokafka's own connection errors are left out: the relay says itself, once per
    attempt and in one line, what it cannot reach.
    """
    handler = logging.StreamHandler()
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
