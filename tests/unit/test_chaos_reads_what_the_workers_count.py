"""The soak reads the workers' own counters right, and sees a worker that hangs.

Contract of ``chaos.scrape``: from a worker's ``/metrics`` text the soak takes its
duplicates by source, outcomes, pauses by dependency, batch reruns and prefilter
errors, and its finished batches and lag; it adds up the last reading of every
incarnation of every slot (each process counts from zero), and for each
incarnation keeps the longest stretch in which its lag was above zero and no
batch finished.
"""

from __future__ import annotations

from collections.abc import Iterator

from chaos.scrape import Scraper, progress_of, totals_of


def scrape(duplicates: int, batches: int, lag: int) -> str:
    return f"""
# TYPE effectively_once_duplicates_total counter
effectively_once_duplicates_total{{consumer="points-service",source="database"}} {duplicates}
effectively_once_duplicates_total{{consumer="points-service",source="prefilter"}} 2.0
# TYPE effectively_once_events_total counter
effectively_once_events_total{{consumer="",outcome="poison",event_type="other"}} 3.0
# TYPE effectively_once_infrastructure_pauses_total counter
effectively_once_infrastructure_pauses_total{{dependency="database"}} 4.0
# TYPE effectively_once_batch_duration_seconds histogram
effectively_once_batch_duration_seconds_bucket{{le="+Inf"}} {batches}
effectively_once_batch_duration_seconds_count {batches}
effectively_once_batch_duration_seconds_sum 1.5
# TYPE effectively_once_consumer_lag gauge
effectively_once_consumer_lag{{topic="orders",partition="0"}} {lag}
effectively_once_consumer_lag{{topic="orders",partition="1"}} 0.0
"""


def test_the_counters_and_the_progress_of_one_reading() -> None:
    text = scrape(duplicates=7, batches=12, lag=5)
    assert totals_of(text) == {
        "duplicates/database": 7,
        "duplicates/prefilter": 2,
        "events/poison": 3,
        "infrastructure_pauses/database": 4,
    }
    assert progress_of(text) == (12, 5)


async def test_every_incarnations_last_reading_adds_up_and_a_hang_is_seen() -> None:
    readings: Iterator[str] = iter(
        [
            scrape(duplicates=1, batches=1, lag=3),  # w1 start 1
            scrape(duplicates=5, batches=1, lag=3),  # w1 start 1, no batch since: hanging
            scrape(duplicates=2, batches=4, lag=0),  # w1 start 2
        ]
    )
    starts = iter([1, 1, 2])
    ticks = iter([10.0, 40.0, 41.0])
    scraper = Scraper(
        lambda: {"w1": 1}, lambda _slot: next(starts), started=0.0, clock=lambda: next(ticks)
    )

    async def read(_url: str) -> str:
        return next(readings)

    for _ in range(3):
        await scraper.scrape_once(read)
    assert scraper.totals()["duplicates/database"] == 5 + 2
    hang = scraper.longest_hang()
    assert hang is not None and (hang.slot, hang.start_number) == ("w1", 1)
    assert (hang.stall.start, hang.stall.seconds) == (10.0, 30.0)
