"""Helpers for the integration tests: databases, workers, the broker, reading results.

``slow_probe`` is a test-only handler module that workers import through
``HANDLER_MODULES``; nothing else here is imported by a worker.
"""
