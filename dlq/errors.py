"""What the DLQ command reports to its operator as a one-line message and an exit code.

A branch of the tree in ``app/errors.py``::

    EffectivelyOnceError
     └── CommandError            a user-facing failure of ``python -m dlq``: exit 2
          ├── NothingMatched     no dead-letter record fits the selection: exit 1
          ├── BrokerUnreachable  the broker did not answer in time
          └── DatabaseUnreachable  the database did not answer, or has no framework tables

Anything else that escapes a command is a bug and keeps its traceback.
"""

from __future__ import annotations

from app.errors import EffectivelyOnceError


class CommandError(EffectivelyOnceError):
    """The command cannot do what was asked; ``str(error)`` is the whole message."""

    exit_code = 2


class NothingMatched(CommandError):
    """The selection is empty (like ``grep``, exit 1: a fact, not a failure)."""

    exit_code = 1


class BrokerUnreachable(CommandError):
    """The broker refused the connection or did not answer within the timeout."""


class DatabaseUnreachable(CommandError):
    """The database refused the connection, did not answer, or was never migrated."""
