"""``LOG_FORMAT=json`` in a worker: stdout and stderr become log records, a traceback one record.

faust's worker would hand every ``write`` to stdout and stderr to logging as a record
of its own (mode's ``FileLogProxy``): ``traceback.print_exc`` writes a frame per call,
and the hook for an exception that ends a thread writes its traceback token by token,
so one traceback became a hundred JSON lines. ``capture_standard_streams`` takes
their place: writes are assembled into lines, one record per line; the lines of a
printed traceback make one record whose message is its last line (the exception)
and whose ``exc`` is the whole text; and an exception that ends a thread is logged
with its ``exc_info``.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from typing import Any, TextIO

TRACEBACK_START = "Traceback (most recent call last):"
MOST_TRACEBACK_LINES = 5_000  # a traceback longer than this is cut into several records


class LineLog(io.TextIOBase):
    """A writable text stream logging each line written to it, and each traceback as one
    record; while logging has no handler yet, it writes to ``fallback`` (the real stream)."""

    def __init__(self, logger: logging.Logger, level: int, fallback: TextIO) -> None:
        self._logger = logger
        self._level = level
        self._fallback = fallback
        self._pending = ""
        self._traceback: list[str] | None = None
        self._lock = threading.RLock()
        self._inside = threading.local()

    def writable(self) -> bool:
        """Always: this stream is only written."""
        return True

    def isatty(self) -> bool:
        """Never a terminal (faust then draws no spinner)."""
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The real stream's encoding."""
        return getattr(self._fallback, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        """Take ``text``; every line it completes is logged (a traceback once it ended)."""
        if getattr(self._inside, "logging", False):
            # A handler of the records logged from here wrote to this stream (its
            # ``handleError``, say): that goes to the real stream, or it would loop.
            self._fallback.write(text)
            return len(text)
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self._line(line)
        return len(text)

    def flush(self) -> None:
        """Log a line left without its newline (``print(..., end="")``), unless it belongs
        to a traceback, which is logged when its last line comes."""
        with self._lock:
            if self._pending and self._traceback is None:
                line, self._pending = self._pending, ""
                self._line(line)

    def _line(self, line: str) -> None:
        if self._traceback is not None:
            self._traceback.append(line)
            # Frames are indented; the first line that is not names the exception.
            if (line and not line[0].isspace()) or len(self._traceback) >= MOST_TRACEBACK_LINES:
                text, self._traceback = "\n".join(self._traceback), None
                self._log(line, text)
        elif line.strip() == TRACEBACK_START:
            self._traceback = [line]
        elif line.strip():
            self._log(line)

    def _log(self, message: str, exc_text: str | None = None) -> None:
        if not self._logger.hasHandlers():  # logging is not set up (yet)
            self._fallback.write(f"{exc_text or message}\n")
            return
        if not self._logger.isEnabledFor(self._level):
            return
        record = self._logger.makeRecord(
            self._logger.name, self._level, "(stream)", 0, message.strip(), (), None
        )
        record.exc_text = exc_text
        self._inside.logging = True
        try:
            self._logger.handle(record)
        finally:
            self._inside.logging = False


def log_thread_exception(args: Any) -> None:
    """``threading.excepthook``: an exception that ended a thread, as one error record."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("effectively_once.threads").error(
        "thread %s ended by an exception",
        name,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


def capture_thread_exceptions(*_: Any, **__: Any) -> None:
    """Log an exception that ends a thread as one record (``log_thread_exception``), in
    either log format; a receiver of faust's ``on_worker_init``. Python's own hook
    writes the traceback to stderr in pieces, and faust's worker logs each piece: a
    hundred records, most of them a lone ``^``."""
    threading.excepthook = log_thread_exception


def capture_standard_streams(*_: Any, **__: Any) -> None:
    """Route stdout (INFO) and stderr (WARNING) into logging and log an exception that
    ends a thread; a receiver of faust's ``on_worker_init``. Idempotent."""
    if not isinstance(sys.stdout, LineLog):
        sys.stdout = LineLog(logging.getLogger("effectively_once.stdout"), logging.INFO, sys.stdout)
    if not isinstance(sys.stderr, LineLog):
        sys.stderr = LineLog(
            logging.getLogger("effectively_once.stderr"), logging.WARNING, sys.stderr
        )
    threading.excepthook = log_thread_exception
