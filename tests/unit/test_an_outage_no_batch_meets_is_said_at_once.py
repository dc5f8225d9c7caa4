"""An outage is said, counted and shown as a pause when the watch finds it, not when a
batch meets it.

Contract (``app.monitoring.watch.Watch``): each round asks the dependency's readiness
check. The first failure logs one ERROR line naming the dependency and why, counts one
pause for it (``effectively_once_infrastructure_pauses_total``) and makes
``effectively_once_paused`` 1; each later failing round adds the round's seconds to its
pause seconds and counts no new pause, and after ``REMIND_EVERY_SECONDS`` one more
ERROR line says it still does not answer; the first answer again logs one WARNING line
with the time since its last answer before the outage and makes
``effectively_once_paused`` 0 (nothing else held it).
"""

from __future__ import annotations

import logging

import pytest

from app.metrics import REGISTRY
from app.monitoring.readiness import Check
from app.monitoring.watch import REMIND_EVERY_SECONDS, Watch

DEPENDENCY = "broker"
EVERY = 5.0


def sample(name: str) -> float:
    labels = {} if name == "effectively_once_paused" else {"dependency": DEPENDENCY}
    return REGISTRY.get_sample_value(name, labels) or 0.0


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (r.levelno, r.getMessage()) for r in caplog.records if r.name == "effectively_once.watch"
    ]


class Scripted:
    """A check answering as told, and a clock moved by hand."""

    def __init__(self) -> None:
        self.ok = True
        self.now = 1_000.0

    async def check(self) -> Check:
        return Check(DEPENDENCY, self.ok, "answered" if self.ok else "no answer within 1 s")

    def clock(self) -> float:
        return self.now


async def test_an_outage_is_said_once_counted_once_and_its_end_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Scripted()
    watch = Watch(DEPENDENCY, script.check, every=EVERY, clock=script.clock)
    pauses_before = sample("effectively_once_infrastructure_pauses_total")
    seconds_before = sample("effectively_once_infrastructure_pause_seconds_total")

    with caplog.at_level(logging.INFO, logger="effectively_once.watch"):
        await watch.once()
        assert said(caplog) == [] and sample("effectively_once_paused") == 0

        script.ok = False
        rounds = int(REMIND_EVERY_SECONDS // EVERY) + 1
        for _ in range(rounds):
            await watch.once()
            script.now += EVERY
        assert sample("effectively_once_paused") == 1
        assert sample("effectively_once_infrastructure_pauses_total") == pauses_before + 1
        assert (
            sample("effectively_once_infrastructure_pause_seconds_total")
            == seconds_before + rounds * EVERY
        )

        script.ok = True
        await watch.once()
        await watch.once()

    assert said(caplog) == [
        (
            logging.ERROR,
            "the broker does not answer (no answer within 1 s): the worker waits for it, "
            "retrying in place; no offset moves past what was committed",
        ),
        (
            logging.ERROR,
            "the broker has not answered for 60 s (no answer within 1 s): the worker still "
            "waits for it",
        ),
        (
            logging.WARNING,
            "the broker answers again; its last answer before was 65 s ago: answered",
        ),
    ]
    assert sample("effectively_once_paused") == 0
