"""Log a failure with only the stack trace ``FAILURE_DETAIL`` lets through.

``exc_info`` would make every formatter render the exception's own traceback, with
whatever its messages and causes hold. ``log_failure`` sets the record's ``exc_text``
to the scrubbed trace of an ``ExceptionText`` instead, cut at ``LOG_TRACE_LIMIT`` characters
(or leaves it out): the standard
formatter writes it after the line, as it would a traceback, and ``LOG_FORMAT=json``
puts it in ``exc``.
"""

from __future__ import annotations

import logging

from app.failure_detail import ExceptionText


def log_failure(
    logger: logging.Logger, level: int, text: ExceptionText, msg: str, *args: object
) -> None:
    """Log ``msg % args`` at ``level``, followed by ``text``'s stack trace if it has one."""
    if not logger.isEnabledFor(level):
        return
    trace = text.logged_trace
    if trace is None:
        logger.log(level, msg, *args, stacklevel=2)
        return
    path, line, function, _ = logger.findCaller(stacklevel=2)
    record = logger.makeRecord(logger.name, level, path, line, msg, args, None, function)
    record.exc_text = trace
    logger.handle(record)
