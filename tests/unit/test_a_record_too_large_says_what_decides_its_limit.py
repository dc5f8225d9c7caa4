"""A record refused as too large says how large it is and what decides the limit.

Contract: the broker's refusal names the record's size, the topic's ``max.message.bytes``
and the command to run once it is raised; the producer's own refusal (past the relay's
``MAX_RECORD_BYTES``, which no topic setting lifts) says the record cannot go as it is
and never tells to raise the topic's limit. Any other refusal is the broker's words alone.
"""

from __future__ import annotations

from aiokafka.errors import (
    MessageSizeTooLargeError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)

from app.outbox.broker import MAX_RECORD_BYTES
from app.outbox.message import Message
from app.outbox.relay import _refused

RECORD = Message("orders", b"o-1", b"x" * 5_000, (("traceparent", b"00-ab"),))


def test_the_brokers_refusal_names_the_size_and_the_topics_limit() -> None:
    for error in (MessageSizeTooLargeError(), RecordTooLargeError()):
        said = _refused(error, RECORD)
        assert ": a record of 5,019 bytes, over what the topic 'orders' accepts" in said, said
        assert "python -m app outbox requeue ID --execute" in said


def test_the_producers_own_refusal_says_it_cannot_go() -> None:
    error = MessageSizeTooLargeError(
        "The message is 40000000 bytes when serialized which is larger than the maximum "
        "request size you have configured with the max_request_size configuration"
    )
    said = _refused(error, RECORD)
    assert f"larger than the {MAX_RECORD_BYTES:,} bytes the relay sends at most" in said
    assert "max.message.bytes" not in said


def test_another_refusal_is_the_brokers_words() -> None:
    said = _refused(UnknownTopicOrPartitionError(), RECORD)
    assert said.startswith("UnknownTopicOrPartitionError") and "bytes" not in said
