"""The workload generator is a pure function of its arguments: same seed, same bytes."""

from __future__ import annotations

from app.demo.workload import generate


def test_same_seed_gives_identical_messages_and_expectation() -> None:
    first = generate(orders=300, users=30, skus=8, seed=42)
    second = generate(orders=300, users=30, skus=8, seed=42)

    assert first.messages == second.messages
    assert first.expected == second.expected


def test_another_seed_gives_another_stream() -> None:
    first = generate(orders=300, users=30, skus=8, seed=1)
    second = generate(orders=300, users=30, skus=8, seed=2)

    assert first.messages != second.messages
