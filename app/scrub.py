"""Take data and secrets out of an exception's text before it leaves the worker.

A failure's message and stack trace go to the DLT, ``failed_event`` and the logs, which
are read more widely and kept longer than the tables the data came from. ``scrub``
removes what an exception copies there without meaning to:

- a statement's bound parameters: SQLAlchemy's ``[parameters: ...]`` line (the
  framework's engines never write it, ``hide_parameters``; an engine of another making
  may);
- the values a database quotes in its own words: PostgreSQL's ``Key (email)=(...)`` and
  ``Failing row contains (...)``, MySQL/MariaDB's ``Duplicate entry '...'`` and
  ``Incorrect ... value: '...'``, a value the driver or server could not read;
- the password of any URL, and each secret given (the settings' passwords).

It also writes a NUL as ``\\x00``: an exception may quote its input (pydantic's message
for a malformed UUID does), and PostgreSQL refuses a NUL in any text column, so the
failure could not be recorded.

What remains is the error, the statement with its placeholders, and the names of
columns, keys and constraints: what finds the bug.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

HIDDEN = "***"
PARAMETERS_HIDDEN = "[SQL parameters hidden]"

# Each pattern keeps its groups and hides what lies between them. A value is taken to
# run to the last closing mark on its line: a value holding the mark is hidden whole.
# Each is tried only where its marker (a literal it cannot match without) is in the text:
# a message of a megabyte without one costs a search for the marker, nothing more.
_VALUES = [
    ("[parameters: ", re.compile(r"^\[parameters: .*$", re.MULTILINE), PARAMETERS_HIDDEN),
    (")=(", re.compile(r"(\bKey \([^\n]*?\)=\().*(\))"), rf"\g<1>{HIDDEN}\g<2>"),
    ("Failing row", re.compile(r"(\bFailing row contains \().*(\))"), rf"\g<1>{HIDDEN}\g<2>"),
    ("' for key", re.compile(r"(\bDuplicate entry ').*(' for key)"), rf"\g<1>{HIDDEN}\g<2>"),
    (
        "' for column",
        re.compile(r"(\bIncorrect [\w ]+ value: ').*(' for column)"),
        rf"\g<1>{HIDDEN}\g<2>",
    ),
    (
        "invalid input ",
        re.compile(r"(\binvalid input (?:syntax|value) for [^:\n]*: ).*"),
        rf"\g<1>{HIDDEN}",
    ),
    (
        "invalid input ",
        re.compile(r"(\binvalid input for query argument \$\d+: ).*"),
        rf"\g<1>{HIDDEN}",
    ),
    # PostgreSQL: value "9223372036854775808" is out of range for type bigint, and
    # "1e400" is out of range for type double precision (a number or a date holds no quote).
    (
        " is out of range for type ",
        re.compile(r'"[^"\n]*+"( is out of range for type )'),
        rf'"{HIDDEN}"\g<1>',
    ),
    (
        "field value out of range: ",
        re.compile(r"(\bfield value out of range: ).*"),
        rf"\g<1>{HIDDEN}",
    ),
    (" literal: ", re.compile(r"(\bmalformed \w+ literal: ).*"), rf"\g<1>{HIDDEN}"),
    # MySQL/MariaDB: Truncated incorrect DOUBLE value: '...'
    (
        "Truncated incorrect ",
        re.compile(r"(\bTruncated incorrect [\w ]+ value: ').*(')"),
        rf"\g<1>{HIDDEN}\g<2>",
    ),
]
# scheme://user:password@host: the password, whatever it is, up to the last @ of the
# authority (an unencoded @ in a password belongs to it). The search starts only where a
# run of scheme characters starts, and the scheme is its first letter on: tried at every
# letter of a long word, it took time by the square of the word's length (a 900 kB
# message held a worker's event loop for minutes).
_URL_PASSWORD = re.compile(
    r"(?<![a-zA-Z0-9+.-])([0-9+.-]*+[a-zA-Z][a-zA-Z0-9+.-]*+://[^\s:/@]*+:)[^\s/]*@"
)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without bound parameters, quoted values, URL passwords and ``secrets``."""
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    if "://" in text:
        text = _URL_PASSWORD.sub(rf"\g<1>{HIDDEN}@", text)
    for marker, pattern, replacement in _VALUES:
        if marker in text:
            text = pattern.sub(replacement, text)
    return text.replace("\x00", "\\x00")


def said(exc: BaseException, longest: int = 300) -> str:
    """``Type: first line`` of ``exc``, scrubbed and cut to ``longest`` characters: what a
    readiness check says a step met while it waits."""
    lines = scrub(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:longest]}" if lines else type(exc).__name__
