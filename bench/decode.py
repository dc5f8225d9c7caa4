"""Decode cost per record, by how the producer wrote the events: ``python -m bench.decode``.

Decodes the benchmark's workload (its own ids: UUIDs and ``user-0001``), and the
same workload numbered and written each way ``app.demo.spellings`` knows, in
batches of ``BATCH_SIZE`` as the worker does without a Redis prefilter, and
prints the CPU time per record: the best of ``--repeat`` passes (the least
disturbed by whatever else the machine runs) and their median. No broker, no
database: only the decode stage, which sits on the worker's hot path.

On a busy machine CPU time varies by tens of percent; instructions do not. Under
``valgrind --tool=callgrind`` (with ``PYTHONHASHSEED=0``), the difference between
``--repeat 3`` and ``--repeat 1`` of one ``--way``, halved and divided by the
records, is the instructions a record costs (``docs/producers.md``).
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Annotated

import typer

from app.demo.envelopes import Message
from app.demo.spellings import Spelling, numbered, spell
from app.pipeline.decode import decode_batch
from app.records import RawRecord
from bench.workload import make_workload
from schemas.registry import known_event_types

BATCH_SIZE = 2_000


def cost_per_record(messages: list[Message], repeat: int) -> tuple[float, float]:
    """Best and median microseconds of CPU time per record over ``repeat`` passes."""
    records = [
        RawRecord("orders", 0, offset, m.key, m.value, m.headers)
        for offset, m in enumerate(messages)
    ]
    payloads = known_event_types()
    decode_batch(records[:BATCH_SIZE], payloads)  # models built, caches warm
    passes = []
    gc.collect()
    gc.disable()  # a collection lands in one pass or another: not the decode's cost
    try:
        for _ in range(repeat):
            started = time.process_time()
            for start in range(0, len(records), BATCH_SIZE):
                _, poison = decode_batch(records[start : start + BATCH_SIZE], payloads)
                assert not poison, poison[0].error
            passes.append((time.process_time() - started) / len(records) * 1e6)
    finally:
        gc.enable()
    return min(passes), statistics.median(passes)


def main(
    orders: Annotated[int, typer.Option(min=1, help="Orders of the workload.")] = 3_000,
    repeat: Annotated[int, typer.Option(min=1, help="Passes over each workload.")] = 15,
    way: Annotated[
        str | None, typer.Option(help="Only this way: bench, strings, numbers or debezium.")
    ] = None,
) -> None:
    """Print the decode cost per record of each way of writing the workload."""
    workload = make_workload(orders)
    ways = {"bench": workload.messages}
    numbers = numbered(workload)
    ways |= {spelling.value: spell(numbers, spelling) for spelling in Spelling}
    if way is not None:
        ways = {way: ways[way]}
    print(f"{len(workload.messages)} records per pass, best and median of {repeat} passes")
    for name, messages in ways.items():
        best, median = cost_per_record(messages, repeat)
        print(f"{WAYS[name]:<44} {best:6.2f} us/record (median {median:6.2f})")


WAYS = {
    "bench": "the benchmark's workload (UUIDs, user-0001)",
    "strings": "numbered, string ids",
    "numbers": "numbered, integer ids, aggregate often in the key",
    "debezium": "numbered, Debezium outbox router records",
}


if __name__ == "__main__":
    typer.run(main)
