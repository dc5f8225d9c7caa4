"""The Redis prefilter (active only with ``REDIS_URL``): a fast path in front of the
database's dedup record, never a replacement for it and never the source of truth.

- ``breaker``: the circuit breaker that stops asking a dead Redis on every batch;
- ``client``: the Redis commands used (MGET, a script that sets keys with a TTL, close);
- ``prefilter``: ``Prefilter.known`` / ``remember``, failing open, with counters;
- ``stage``: the calls the batch processor makes before validation and after a
  transaction.
"""

from app.prefilter.breaker import Circuit, CircuitBreaker
from app.prefilter.prefilter import Prefilter, PrefilterCounters
from app.prefilter.stage import ask, remember_applied, skip_known

__all__ = [
    "Circuit",
    "CircuitBreaker",
    "Prefilter",
    "PrefilterCounters",
    "ask",
    "remember_applied",
    "skip_known",
]
