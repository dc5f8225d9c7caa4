"""Build the worker's faust app from the environment, or exit with a clear message.

A broker that refuses the worker's security settings (its login, the trust in its
certificate, the name it holds, the client certificate) is found here, before faust
starts, by one connection made as faust's clients will make theirs: faust itself would
stop with a traceback that says only that it could not bootstrap. A broker that cannot
be reached is left to faust, as with PLAINTEXT. The same for a database whose URL asks
for TLS: one connection, and a certificate it does not trust (or that does not name the
host) is one line; a database out of reach is waited for, as without TLS.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from app.db.refusal import check_database
from app.errors import BrokerUnreachable, ConfigurationError
from app.kafka_clients import CONNECT_TIMEOUT_SECONDS, KafkaClients
from app.registry import default_registry
from app.runtime.faust_app import create_app
from app.runtime.services import import_handlers
from app.settings import describe, get_settings


def build_app_or_exit() -> Any:
    """The faust app; a configuration mistake prints one clear line and exits with code 2."""
    try:
        settings = get_settings()
        registry = import_handlers(settings, default_registry)
        _in_own_loop(check_database(settings.database_url, settings.db_timeouts))
        clients = KafkaClients.from_settings(settings)
        if settings.broker_security_protocol != "PLAINTEXT":
            _broker_takes(clients)
    except ValidationError as exc:
        _exit("invalid settings:\n" + "\n".join(f"  {line}" for line in describe(exc)))
    except ConfigurationError as exc:  # BrokerRefused and DatabaseRefused among them
        _exit(str(exc))
    return create_app(settings, registry, clients)


def _broker_takes(clients: KafkaClients) -> None:
    """Raise ``BrokerRefused`` if the broker refuses ``clients``' settings."""
    # aiokafka's own lines (PLAIN "in the clear") would reach stderr through logging's
    # last resort: logging is not configured yet. faust's clients say them again later.
    quiet = logging.NullHandler()
    logging.getLogger("aiokafka").addHandler(quiet)
    try:
        _in_own_loop(clients.check(CONNECT_TIMEOUT_SECONDS))
    except BrokerUnreachable:
        pass  # left to faust, as with PLAINTEXT
    finally:
        logging.getLogger("aiokafka").removeHandler(quiet)


def _in_own_loop(check: Coroutine[Any, Any, object]) -> None:
    """Run ``check`` in a thread and event loop of its own: faust's loop, on this thread,
    does not exist yet."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        thread.submit(asyncio.run, check).result()


def _exit(message: str) -> None:
    print(f"effectively-once: configuration error: {message}", file=sys.stderr)
    raise SystemExit(2)
