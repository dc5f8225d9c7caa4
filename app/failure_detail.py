"""``FAILURE_DETAIL``: what of a failure's exception travels to the DLT, ``failed_event`` and
the logs.

``type``: the exception's class only. ``message`` (the default): its message too.
``full``: its stack trace too, its causes included. Whatever travels is scrubbed
(``app.scrub``) of bound parameters, values the database quoted, URL passwords and the
settings' secrets. One ``ExceptionText`` per failure feeds the DLT record's headers, the
``failed_event`` row and the log line, so the three always say the same.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from app.scrub import scrub

if TYPE_CHECKING:
    from app.settings import Settings


class FailureDetail(StrEnum):
    """How much of an exception leaves the worker (``FAILURE_DETAIL``)."""

    FULL = "full"
    MESSAGE = "message"
    TYPE = "type"


# A log line says this much of an exception's message (the DLT header holds 2,000), and
# its stack trace this much of the trace (the DLT header holds 8,000).
LINE_MESSAGE_LIMIT = 2_000
LOG_TRACE_LIMIT = 8_000


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


@dataclass(frozen=True, slots=True)
class ExceptionText:
    """What of one exception may be written down: ``type`` is ``module.QualifiedName``,
    ``name`` the class's own; ``message`` and ``stacktrace`` are ``None`` where the policy
    withholds them."""

    type: str
    name: str
    message: str | None = None
    stacktrace: str | None = None

    @property
    def line(self) -> str:
        """``Name: message`` (``Name`` alone without one), for a log line: a message longer
        than ``LINE_MESSAGE_LIMIT`` is cut there, saying how much more it had (the DLT
        record and the ``failed_event`` row keep theirs, cut at their own limits)."""
        if not self.message:
            return self.name
        return f"{self.name}: {_cut(self.message, LINE_MESSAGE_LIMIT)}"

    @property
    def logged_trace(self) -> str | None:
        """The stack trace for a log record, cut at ``LOG_TRACE_LIMIT`` as ``line`` is (its
        last lines repeat the message: an exception quoting a whole body would put the body
        in every log record)."""
        if self.stacktrace is None:
            return None
        return _cut(self.stacktrace.rstrip("\n"), LOG_TRACE_LIMIT)


@dataclass(frozen=True, slots=True)
class FailureDetailPolicy:
    """Turns an exception into the ``ExceptionText`` that ``detail`` lets through,
    with ``secrets`` hidden wherever they appear."""

    detail: FailureDetail = FailureDetail.MESSAGE
    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, settings: Settings) -> FailureDetailPolicy:
        """The policy ``settings`` ask for, hiding their secrets."""
        return cls(settings.failure_detail, settings.secrets)

    def describe(self, exc: BaseException) -> ExceptionText:
        """What of ``exc`` may travel."""
        kind = type(exc)
        text = ExceptionText(f"{kind.__module__}.{kind.__qualname__}", kind.__qualname__)
        if self.detail is FailureDetail.TYPE:
            return text
        message = scrub(str(exc), self.secrets)
        if self.detail is FailureDetail.MESSAGE:
            return ExceptionText(text.type, text.name, message)
        trace = scrub("".join(traceback.format_exception(exc)), self.secrets)
        return ExceptionText(text.type, text.name, message, trace)
