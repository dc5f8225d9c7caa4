"""``python -m dlq`` tells a DLT its login may not describe from one that does not exist.

Contract: on a broker that authorizes, a DLT that holds records but that the command's
login has no ACL on is a refusal: exit code 2 and one line naming the topic and the ACL
to grant (before, the broker leaves such a topic out of its metadata, and the command said
``no topic ... (nothing was dead-lettered yet?)`` with exit code 1, "nothing matched": an
operator or a script would take the DLT for empty). A DLT that does not exist, for a login
that may describe it, is still exit code 1 and ``no topic``.
"""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from app.demo.acl_kafka import AclKafka
from dlq.topics import dlt_topic
from tests.integration.support.acls import USER, acl_stream, create_topics, grant
from tests.integration.support.dlq import DlqCommand

pytestmark = pytest.mark.integration


async def test_a_dlt_hidden_by_the_acls_is_a_refusal_not_an_empty_dlt(
    acl_kafka: AclKafka, migrated_database: str
) -> None:
    stream = acl_stream(acl_kafka)
    dlt = dlt_topic(stream.topic)
    await create_topics(stream, [stream.topic, dlt])
    producer = AIOKafkaProducer(bootstrap_servers=stream.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(dlt, b"{}", key=b"o-1")
    finally:
        await producer.stop()
    dlq = DlqCommand(stream, migrated_database)
    env = acl_kafka.settings(USER)

    hidden = await dlq("list", env=env)  # no ACL on the DLT at all

    missing_topic = f"{stream.topic}-none"
    grant(acl_kafka, "Describe", [dlt_topic(missing_topic)])
    missing = await dlq("list", env={**env, "ORDER_TOPIC": missing_topic})

    assert hidden.code == 2, hidden
    said = hidden.err.strip().splitlines()
    assert len(said) == 1 and "Traceback" not in hidden.err, hidden
    assert f"the broker refused to let this login read {dlt}" in said[0], hidden
    assert "grant it Read and Describe on the topic" in said[0], hidden
    assert env["BROKER_SASL_PASSWORD"] not in hidden.err + hidden.out
    assert missing.code == 1, missing
    assert f"no topic {dlt_topic(missing_topic)} on the broker" in missing.err + missing.out
