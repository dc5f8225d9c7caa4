"""An exception that ends a thread is logged as one record, in either log format.

Contract: once ``capture_thread_exceptions`` ran (the worker's start does, whatever
``LOG_FORMAT``), a thread ended by an exception leaves one ERROR record naming the
thread, the exception with its traceback attached (``exc_info``), and nothing on
stderr: Python's own hook writes the traceback in pieces, which faust's worker logged
as a record each (about a hundred, most of them a lone ``^``).
"""

from __future__ import annotations

import threading

import pytest

from app.logging_streams import capture_thread_exceptions


def test_one_error_record_with_the_traceback(
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)  # restored after
    capture_thread_exceptions()

    def fail() -> None:
        raise RuntimeError("the fetcher's close")

    thread = threading.Thread(target=fail, name="ConsumerThread-1")
    thread.start()
    thread.join()

    records = [r for r in caplog.records if r.name == "effectively_once.threads"]
    assert len(records) == 1
    (record,) = records
    assert record.levelname == "ERROR"
    assert "ConsumerThread-1" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    assert "Traceback" not in capsys.readouterr().err
