"""A secured broker of the demo and the tests prints none of its passwords.

Contract: ``repr`` of ``AclKafka`` and ``SecureKafka`` (which pytest prints for a failing
test's fixtures, and a log may print) holds none of the SASL users' passwords, the
client key's password or the JAAS configuration they are written into. Before, a failing
ACL test printed every user's password.
"""

from __future__ import annotations

from pathlib import Path

from app.demo.acl_kafka import AclKafka
from app.demo.secure_kafka import SecureKafka


def test_an_acl_broker_prints_no_password(tmp_path: Path) -> None:
    broker = AclKafka(size=1, log_dir=tmp_path)
    printed = repr(broker)
    assert broker.passwords
    assert not [user for user, password in broker.passwords.items() if password in printed]
    assert "jaas" not in printed


def test_a_secure_broker_prints_no_password(tmp_path: Path) -> None:
    broker = SecureKafka(folder=tmp_path)
    printed = repr(broker)
    secrets = [broker.scram_user.password, broker.plain_user.password, broker.client_key_password]
    assert not [secret for secret in secrets if secret in printed]
    assert "jaas" not in printed
