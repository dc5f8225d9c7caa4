"""``/ready``'s broker check connects as the worker's clients do, not just over TCP.

Contract: the ``broker`` check passes, naming the server, when a bootstrap server takes
a connection with the worker's own settings (TLS and login included: the factory's
``check``); it fails with the factory's one-line reason when the broker refuses those
settings or cannot be reached, and never raises. A port that only accepts TCP is not
enough: the check is given the factory, which speaks the protocol.
"""

from __future__ import annotations

from app.errors import BrokerRefused, BrokerUnreachable
from app.kafka_clients import KafkaClients
from app.monitoring import readiness


class Answers:
    """Stands in for ``KafkaClients``: answers ``check`` with ``outcome``."""

    def __init__(self, outcome: str | Exception) -> None:
        self.outcome = outcome
        self.within: float | None = None

    async def check(self, within: float) -> str:
        self.within = within
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


async def test_a_server_that_takes_the_settings_passes() -> None:
    clients = Answers("127.0.0.1:9093")
    assert await readiness.broker(clients) == readiness.Check(
        "broker", True, "127.0.0.1:9093 accepts connections"
    )
    assert clients.within == readiness.CHECK_TIMEOUT_SECONDS


async def test_a_refusal_or_no_answer_fails_with_its_reason() -> None:
    refused = BrokerRefused(
        "cannot connect to the broker at 127.0.0.1:9093: login of alice refused"
    )
    down = BrokerUnreachable("cannot reach the broker at 127.0.0.1:9093: no answer within 1 s")
    for error in (refused, down):
        assert await readiness.broker(Answers(error)) == readiness.Check(
            "broker", False, str(error)
        )


async def test_the_factory_is_what_the_check_is_given() -> None:
    # Nothing listens on port 1: refused at once, said in the factory's words.
    check = await readiness.broker(KafkaClients("kafka://127.0.0.1:1"))
    assert not check.ok
    assert check.detail.startswith("cannot reach the broker at 127.0.0.1:1: ")
