"""A mistake on the command line gets a one-line answer and exit code 2, never a traceback.

Contract: a malformed position, time, status or reason, a window whose start is after
its end, a non-positive rate, ``show``
without a record, a bad setting in the environment, and ``--execute`` on the
whole dead-letter topic without ``--all`` are refused before the broker or
database is contacted (they point at a port nothing listens on here). So is a broker
that fails once connected (its metadata gone, the dead-letter topic not readable for
this login): one line naming it, exit code 2.
"""

from __future__ import annotations

import pytest
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError
from typer.testing import CliRunner

import dlq.commands
from dlq.cli import cli

ENV = {
    "BROKER_URL": "kafka://127.0.0.1:1",
    "DATABASE_URL": "sqlite+aiosqlite:///does/not/exist.db",
    "ORDER_TOPIC": "orders",
}


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["show", "seven"], {}, "<dlt-partition>:<dlt-offset>"),
        (["show"], {}, "name the record by <partition>:<offset> or by --event-id"),
        (["show", "0:1", "--event-id", "e-1"], {}, "name the record by"),
        (["replay", "0:1", "1"], {}, "<dlt-partition>:<dlt-offset>"),
        (["list", "--since", "yesterday"], {}, "ISO-8601"),
        (["list", "--until", "soon"], {}, "ISO-8601"),
        (["list", "--since", "1000000d"], {}, "'1000000d' reaches back before"),
        (["list", "--since", "1h", "--until", "2h"], {}, "--since is later than --until"),
        (["list", "--status", "lost"], {}, "'lost' is not one of"),
        (["replay", "--reason", "oops"], {}, "'oops' is not one of"),
        (["list", "--limit", "0"], {}, "--limit"),
        (["replay", "--rate", "0"], {}, "--rate"),
        (["skip", "--bogus"], {}, "No such option"),
        (["list"], {"DATABASE_URL": "oracle://x"}, "bad settings in the environment: DATABASE_URL"),
        (["list"], {"RETRY_DELAYS": "5,1"}, "RETRY_DELAYS"),
        (["replay", "--execute"], {}, "--execute without a selection would replay all"),
        (["skip", "--execute", "--topic", "other"], {}, "would skip all of other.DLT"),
    ],
)
def test_mistakes_get_one_clear_line_and_exit_code_2(
    args: list[str], env: dict[str, str], says: str
) -> None:
    result = CliRunner().invoke(cli, args, env={**ENV, **env})

    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (
            KafkaError("Unable to get cluster metadata over all known brokers"),
            "reading orders.DLT failed: KafkaError",
        ),
        (
            TopicAuthorizationFailedError("orders.DLT"),
            "the broker refused to let this login read orders.DLT",
        ),
    ],
)
def test_a_broker_that_fails_once_connected_is_one_line_too(
    monkeypatch: pytest.MonkeyPatch, error: Exception, says: str
) -> None:
    async def refused(*_args: object, **_kwargs: object) -> None:
        raise error

    monkeypatch.setattr(dlq.commands, "read_topic", refused)
    result = CliRunner().invoke(cli, ["list"], env=ENV)

    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split()), result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
