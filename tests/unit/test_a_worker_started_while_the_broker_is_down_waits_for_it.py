"""A worker that starts while the broker cannot be reached waits for it, and says so.

Contract (``app.runtime.broker_wait``, run first by the worker's faust app): while no
bootstrap server answers, the start waits (0.5 s, doubling up to 5 s) and logs why at
each try; once one answers the start goes on. A broker that refuses the worker's
settings is raised at once, not waited for. The worker's app waits before it declares a
topic or starts faust's clients, which would end the worker with ``Unable to bootstrap``;
and faust's producer and consumer, whose first connection may still fail (the broker cut
off or restarted right then), start again until they connect.
"""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import KafkaConnectionError
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

from app.errors import BrokerRefused, BrokerUnreachable
from app.registry import Registry
from app.runtime import transport
from app.runtime.broker_wait import until_connected, wait_for_broker
from app.runtime.faust_app import create_app
from app.settings import Settings


class Broker:
    """``KafkaClients.check`` of a broker down for ``down`` tries."""

    def __init__(self, down: int, refuses: bool = False) -> None:
        self.down = down
        self.refuses = refuses
        self.tries = 0

    async def check(self, within: float) -> str:
        self.tries += 1
        if self.refuses:
            raise BrokerRefused("cannot connect to the broker at b:9092: login refused")
        if self.tries <= self.down:
            raise BrokerUnreachable("cannot reach the broker at b:9092: connection refused")
        return "b:9092"


async def test_the_start_waits_until_the_broker_answers(caplog: pytest.LogCaptureFixture) -> None:
    broker = Broker(down=6)
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    with caplog.at_level(logging.INFO, "effectively_once.worker"):
        await wait_for_broker(broker, sleep=sleep)  # type: ignore[arg-type]
    assert broker.tries == 7
    assert pauses == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    waits = [r.getMessage() for r in caplog.records if "waits for the broker" in r.getMessage()]
    assert len(waits) == 6
    assert waits[0].startswith("cannot reach the broker at b:9092: connection refused")
    assert any("the broker answers after" in r.getMessage() for r in caplog.records)


async def test_a_broker_that_refuses_the_settings_is_not_waited_for() -> None:
    broker = Broker(down=0, refuses=True)
    with pytest.raises(BrokerRefused):
        await wait_for_broker(broker)  # type: ignore[arg-type]
    assert broker.tries == 1


def test_the_worker_app_waits_for_the_broker_of_its_settings() -> None:
    settings = Settings(broker_url="kafka://b:9092", topics_declare=False)
    app = create_app(settings, Registry())
    assert app.broker_clients is not None
    assert app.broker_clients.bootstrap == ["b:9092"]


async def test_a_client_whose_first_connection_fails_starts_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tries: list[int] = []
    pauses: list[float] = []

    async def connect() -> None:
        tries.append(1)
        if len(tries) < 3:
            raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 9092)]")

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    with caplog.at_level(logging.WARNING, "effectively_once.worker"):
        await until_connected(connect, "producer", sleep=sleep)
    assert len(tries) == 3
    assert pauses == [0.5, 1.0]
    assert "the worker's producer cannot reach the broker" in caplog.text


async def test_any_other_failure_of_a_start_is_raised() -> None:
    async def connect() -> None:
        raise ValueError("not a connection")

    with pytest.raises(ValueError):
        await until_connected(connect, "consumer")


def test_the_worker_s_producer_and_consumer_start_until_connected() -> None:
    app = create_app(Settings(broker_url="kafka://b:9092", topics_declare=False), Registry())
    assert isinstance(app.producer, transport.Producer)
    thread = app.consumer._new_consumer_thread()
    assert type(thread).on_start is not AIOKafkaConsumerThread.on_start
