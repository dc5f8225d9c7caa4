"""Build the worker's faust app from the environment, or exit with a clear message.

Found here, before faust starts, each in one line with exit code 2:

- a broker that refuses the worker's security settings (its login, the trust in its
  certificate, the name it holds, the client certificate), by one connection made as
  faust's clients will make theirs: faust itself would stop with a traceback that
  says only that it could not bootstrap;
- over that connection, a topic the worker needs that its principal may not
  ``Describe``, or that is missing while ``TOPICS_DECLARE=false``
  (``app.runtime.topic_check``): faust would ignore it, or retry, without a word;
- a Redis (``REDIS_URL``) that refuses its settings: its TLS certificate not trusted
  or not naming the host, the login refused. A mistake, not an outage, so not left to
  the prefilter's fail-open path, which would hide it for good;
- the web server's port (``--web-port``) held by another process
  (``app.runtime.web_port``);
- a database whose URL asks for TLS and whose certificate is not trusted or does not
  name the host (``app.db.refusal``); with ``MIGRATE_ON_START=false``, one that answers
  without the framework's tables (never migrated).

A broker, a database or a Redis that cannot be reached is left to faust and to the prefilter
(wait, fail open), as at run time.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from aiokafka.errors import KafkaError
from pydantic import ValidationError

from app.db.refusal import check_database, check_schema
from app.errors import BrokerUnreachable, ConfigurationError
from app.kafka_clients import CONNECT_TIMEOUT_SECONDS, KafkaClients
from app.prefilter.client import refusal
from app.registry import default_registry
from app.runtime.faust_app import create_app
from app.runtime.services import import_handlers
from app.runtime.topic_check import check_topics, needed_topics
from app.runtime.web_port import taken_web_port
from app.settings import Settings, describe, get_settings

REDIS_CHECK_SECONDS = 5.0
T = TypeVar("T")


def build_app_or_exit() -> Any:
    """The faust app; a configuration mistake prints one clear line and exits with code 2."""
    try:
        settings = get_settings()
        if why := taken_web_port():
            raise ConfigurationError(why)
        registry = import_handlers(settings, default_registry)
        _run_quietly(check_database(settings.database_url, settings.db_timeouts))
        if not settings.migrate_on_start:
            _run_quietly(check_schema(settings.database_url, settings.db_timeouts))
        clients = KafkaClients.from_settings(settings)
        _broker_serves(clients, settings, needed_topics(settings, registry))
        if settings.redis_url:
            _redis_takes(settings.redis_url)
    except ValidationError as exc:
        _exit("invalid settings:\n" + "\n".join(f"  {line}" for line in describe(exc)))
    except ConfigurationError as exc:  # BrokerRefused and DatabaseRefused among them
        _exit(str(exc))
    return create_app(settings, registry, clients)


def _broker_serves(clients: KafkaClients, settings: Settings, topics: list[str]) -> None:
    """Raise ``BrokerRefused`` if the broker refuses ``clients``' settings, and a
    ``ConfigurationError`` if one of ``topics`` is not there for them."""

    async def check() -> None:
        try:
            conn, _ = await clients.connect(CONNECT_TIMEOUT_SECONDS)
        except BrokerUnreachable:
            return  # left to faust, which waits for it
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                await check_topics(conn, topics, settings)
        except (TimeoutError, OSError, KafkaError):
            return  # the broker went away meanwhile: the same
        finally:
            conn.close()

    _run_quietly(check())


def _redis_takes(url: str) -> None:
    """Raise a ``ConfigurationError`` if the Redis at ``url`` refuses its settings."""
    why = _run_quietly(refusal(url, REDIS_CHECK_SECONDS))
    if why:
        raise ConfigurationError(why)


def _run_quietly(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on an event loop of its own (faust's, on this thread, does not exist
    yet), with aiokafka's lines (PLAIN "in the clear") kept from stderr: logging is not
    configured yet, and faust's clients say them again later."""
    quiet = logging.NullHandler()
    logging.getLogger("aiokafka").addHandler(quiet)
    try:
        with ThreadPoolExecutor(max_workers=1) as thread:
            return thread.submit(asyncio.run, work).result()
    finally:
        logging.getLogger("aiokafka").removeHandler(quiet)


def _exit(message: str) -> None:
    print(f"effectively-once: configuration error: {message}", file=sys.stderr)
    raise SystemExit(2)
