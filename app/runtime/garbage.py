"""The worker's garbage collector, tuned for many short-lived objects per batch.

A batch allocates a few objects per record (decoded events, rows, outcomes) and
drops them all when it is done. With the interpreter's defaults, a young
collection runs every 700 allocations and every few of them a full one walks
every object the worker holds, faust's and SQLAlchemy's included. After
start-up those long-lived objects are frozen (never walked again), and young
collections run every ``GC_YOUNG_THRESHOLD`` allocations. Reference cycles are
still collected; 0 leaves the interpreter's defaults.
"""

from __future__ import annotations

import gc

# How many young collections per middle one, and middle per full one (defaults: 10, 10).
MIDDLE_EVERY = 20
FULL_EVERY = 50


def tune_garbage_collector(young_threshold: int) -> None:
    """Freeze what exists now and collect the young generation every ``young_threshold``."""
    if young_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold, MIDDLE_EVERY, FULL_EVERY)
