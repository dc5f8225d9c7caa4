"""What of an exception's text may leave the worker: never data or a secret.

Contract: ``scrub`` takes out a SQL statement's bound parameters (SQLAlchemy's
``[parameters: ...]`` line, whatever engine raised it), the values a database quotes in
its own messages (PostgreSQL's ``Key (...)=(...)``, ``Failing row contains (...)``,
``value "..." is out of range``, ``field value out of range: "..."`` and ``malformed ...
literal: "..."``, MySQL/MariaDB's ``Duplicate entry '...'``, ``Incorrect ... value:
'...'`` and ``Truncated incorrect ... value: '...'``, a value its driver or server could
not read), the password of any URL, and each secret it is given (empty ones ignored),
wherever they stand in the text; the rest of the text (the error, the statement with its
placeholders, column and constraint names) stays as it was. A long message costs time by
its length, not its square: a handler's exception quoting a 300 kB body (one word, or
words and spaces) is scrubbed at once, as every failure's text is, on the worker's event
loop (it took about 25 minutes for 900 kB of letters, the worker answering nothing
meanwhile).
"""

from __future__ import annotations

import time

import pytest

from app.scrub import scrub

EMAIL = "jane.doe@example.com"
CARD = "4111111111111111"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "(asyncpg.UniqueViolationError) duplicate key\n"
            "[SQL: INSERT INTO t (email, card) VALUES ($1, $2)]\n"
            f"[parameters: ('{EMAIL}', '{CARD}')]\n"
            "(Background on this error at: https://sqlalche.me/e/21/gkpj)",
            ["duplicate key", "[SQL: INSERT INTO t (email, card) VALUES ($1, $2)]", "gkpj"],
        ),
        (
            f"DETAIL:  Key (email, card)=({EMAIL}, {CARD}) already exists.",
            ["DETAIL:  Key (email, card)=(", ") already exists."],
        ),
        (
            f'DETAIL:  Key (email)=({EMAIL}) is not present in table "customer".',
            ['is not present in table "customer"'],
        ),
        (
            f"DETAIL:  Failing row contains ({EMAIL}, {CARD}, null).",
            ["DETAIL:  Failing row contains ("],
        ),
        (
            f"(1062, \"Duplicate entry '{EMAIL}-{CARD}' for key 'PRIMARY'\")",
            ["(1062, \"Duplicate entry '", "' for key 'PRIMARY'\")"],
        ),
        (
            f"(1366, \"Incorrect integer value: '{EMAIL}' for column `shop`.`t`.`card` at row 1\")",
            ["Incorrect integer value: '", "for column `shop`.`t`.`card` at row 1"],
        ),
        (
            f'invalid input syntax for type bigint: "{CARD}"',
            ["invalid input syntax for type bigint: "],
        ),
        (
            f"invalid input for query argument $1: '{EMAIL}' (expected int, got str)",
            ["invalid input for query argument $1: "],
        ),
        (
            f'value "{CARD}" is out of range for type bigint',
            ['value "***" is out of range for type bigint'],
        ),
        (
            f'"{CARD}e400" is out of range for type double precision',
            ['"***" is out of range for type double precision'],
        ),
        (
            f'date/time field value out of range: "{CARD}"',
            ["date/time field value out of range: ***"],
        ),
        (f'malformed array literal: "{{{EMAIL}"', ["malformed array literal: ***"]),
        (
            f"(1292, \"Truncated incorrect DOUBLE value: '{EMAIL}'\")",
            ["Truncated incorrect DOUBLE value: '***'\")"],
        ),
    ],
)
def test_data_in_a_database_error_is_taken_out(text: str, kept: list[str]) -> None:
    scrubbed = scrub(text)

    assert EMAIL not in scrubbed and CARD not in scrubbed
    assert all(part in scrubbed for part in kept), scrubbed


def test_the_parameters_line_is_replaced_wherever_it_stands() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "h.py", line 3, in f\n'
        f"sqlalchemy.exc.IntegrityError: boom\n[parameters: [{{'e': '{EMAIL}'}}]]\n\n"
        "The above exception was the direct cause of the following exception:\n"
    )

    scrubbed = scrub(trace)

    assert EMAIL not in scrubbed
    assert "[SQL parameters hidden]" in scrubbed
    assert scrubbed.endswith(
        "The above exception was the direct cause of the following exception:\n"
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://orders:s3cr%40t@db.internal:5432/orders",
        "redis://:s3cr%40t@cache:6379/0",
        "rediss://default:s3cr%40t@cache:6380",
    ],
)
def test_the_password_of_a_url_is_taken_out(url: str) -> None:
    scrubbed = scrub(f"cannot connect to {url}: refused")

    assert "s3cr" not in scrubbed
    assert scrubbed.startswith("cannot connect to ") and scrubbed.endswith(": refused")
    assert "***@" in scrubbed


def test_each_secret_given_is_taken_out_and_an_empty_one_changes_nothing() -> None:
    text = "SASL login with hunter2 failed; key password hunter2 refused"

    assert scrub(text, ["hunter2", ""]) == "SASL login with *** failed; key password *** refused"
    assert scrub("plain text", [""]) == "plain text"


def test_text_without_data_or_secrets_is_unchanged() -> None:
    text = (
        "(sqlite3.IntegrityError) UNIQUE constraint failed: user_points.user_id\n"
        "[SQL: INSERT INTO user_points (user_id, balance) VALUES (?, ?)]\n"
        "[SQL parameters hidden due to hide_parameters=True]"
    )

    assert scrub(text) == text


@pytest.mark.parametrize(
    "body",
    ["w" * 300_000, "ab1 " * 75_000, "w" * 300_000 + " postgresql://app:s3cret@db/orders"],
    ids=["one-word", "words", "one-word-then-a-url"],
)
def test_a_long_message_is_scrubbed_in_time_linear_in_its_length(body: str) -> None:
    started = time.perf_counter()
    scrubbed = scrub(f"upstream refused the request: {body}")
    # Linear: milliseconds. By the square of the length (the old search): about 100 s.
    assert time.perf_counter() - started < 2.0
    assert "s3cret" not in scrubbed
    assert scrubbed.startswith("upstream refused the request: ")
