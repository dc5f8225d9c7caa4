"""Metrics are derived from outcome values.

Contract: ``record_outcomes`` counts each outcome once under its consumer, kind
and eventType (an eventType no schema knows is ``other``, so producers cannot
blow up the label set); a duplicate the Redis prefilter skipped counts as
``source=prefilter``, any other as ``database``; a ``retried`` outcome counts
under its tier (from the retry topic), a ``dead-lettered`` or ``poison`` one
under its dlt-reason, and poison read again (``DEAD_LETTERED_BEFORE``: no DLT
record written) not at all; an ``applied`` outcome of a replay also counts as a
replay of its consumer (a replay that is a duplicate or a skip does not).
The prefilter's own running totals and circuit state are
exported as they are.
"""

from __future__ import annotations

from app import metrics
from app.metrics import REGISTRY
from app.pipeline.outcomes import DEAD_LETTERED_BEFORE, REPLAYED, Kind, Outcome
from app.prefilter.stage import SKIPPED


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_each_outcome_counts_once_under_its_labels() -> None:
    events = "effectively_once_events_total"
    before = {
        "applied": sample(events, consumer="c1", outcome="applied", event_type="OrderPaid"),
        "other": sample(events, consumer="c1", outcome="applied", event_type="other"),
        "db": sample("effectively_once_duplicates_total", consumer="c1", source="database"),
        "pf": sample("effectively_once_duplicates_total", consumer="c1", source="prefilter"),
        "tier": sample("effectively_once_retries_total", consumer="c1", tier="30s"),
        "dead": sample("effectively_once_dlt_records_total", consumer="c1", reason="non-retryable"),
        "poison": sample("effectively_once_dlt_records_total", consumer="", reason="undecodable"),
        "batches": sample("effectively_once_batch_size_count"),
        "records": sample("effectively_once_batch_size_sum"),
    }
    metrics.record_outcomes(
        [
            Outcome(Kind.APPLIED, "c1", "e1", "OrderPaid"),
            Outcome(Kind.APPLIED, "c1", "e2", "SomethingNobodyKnows"),
            Outcome(Kind.DUPLICATE, "c1", "e1", "OrderPaid"),
            Outcome(Kind.DUPLICATE, "c1", "e1", "OrderPaid", SKIPPED),
            Outcome(Kind.RETRIED, "c1", "e3", "OrderPaid", "orders.retry.30s"),
            Outcome(Kind.DEAD_LETTERED, "c1", "e4", "OrderPaid", "non-retryable"),
            Outcome(Kind.POISON, "", None, None, "undecodable"),
        ],
        batch_seconds=0.2,
        batch_size=6,
    )
    after = {
        "applied": sample(events, consumer="c1", outcome="applied", event_type="OrderPaid"),
        "other": sample(events, consumer="c1", outcome="applied", event_type="other"),
        "db": sample("effectively_once_duplicates_total", consumer="c1", source="database"),
        "pf": sample("effectively_once_duplicates_total", consumer="c1", source="prefilter"),
        "tier": sample("effectively_once_retries_total", consumer="c1", tier="30s"),
        "dead": sample("effectively_once_dlt_records_total", consumer="c1", reason="non-retryable"),
        "poison": sample("effectively_once_dlt_records_total", consumer="", reason="undecodable"),
        "batches": sample("effectively_once_batch_size_count"),
        "records": sample("effectively_once_batch_size_sum"),
    }
    moved = {key: after[key] - before[key] for key in before}
    assert moved == {
        "applied": 1,
        "other": 1,
        "db": 1,
        "pf": 1,
        "tier": 1,
        "dead": 1,
        "poison": 1,
        "batches": 1,
        "records": 6,
    }


def test_poison_read_again_counts_no_dlt_record() -> None:
    dlt = "effectively_once_dlt_records_total"
    before = {r: sample(dlt, consumer="", reason=r) for r in ("invalid-schema", "other")}

    metrics.record_outcomes(
        [
            Outcome(Kind.POISON, "", "p1", None, DEAD_LETTERED_BEFORE, "field required"),
            Outcome(Kind.POISON, "", "p2", None, "invalid-schema", "field required"),
        ],
        batch_seconds=0.1,
        batch_size=2,
    )

    moved = {r: sample(dlt, consumer="", reason=r) - before[r] for r in before}
    assert moved == {"invalid-schema": 1, "other": 0}


def test_a_replay_counts_once_it_applies() -> None:
    before = {c: sample("effectively_once_replays_total", consumer=c) for c in ("r1", "r2")}

    metrics.record_outcomes(
        [
            Outcome(Kind.APPLIED, "r1", "e1", "OrderPaid", REPLAYED),
            Outcome(Kind.APPLIED, "r1", "e2", "OrderPaid", REPLAYED),
            Outcome(Kind.APPLIED, "r1", "e3", "OrderPaid"),
            Outcome(Kind.DUPLICATE, "r2", "e1", "OrderPaid"),
            Outcome(Kind.SKIPPED, "r2", "e4", "OrderPaid"),
        ],
        batch_seconds=0.1,
        batch_size=5,
    )

    moved = {c: sample("effectively_once_replays_total", consumer=c) - before[c] for c in before}
    assert moved == {"r1": 2, "r2": 0}


def test_initialise_creates_zero_series_for_every_consumer() -> None:
    metrics.initialise(["fresh-consumer"])
    assert (
        REGISTRY.get_sample_value(
            "effectively_once_duplicates_total",
            {"consumer": "fresh-consumer", "source": "prefilter"},
        )
        == 0
    )
    assert (
        REGISTRY.get_sample_value("effectively_once_parked_events", {"consumer": "fresh-consumer"})
        == 0
    )
    assert (
        REGISTRY.get_sample_value("effectively_once_replays_total", {"consumer": "fresh-consumer"})
        == 0
    )
    assert (
        REGISTRY.get_sample_value(
            "effectively_once_infrastructure_pauses_total", {"dependency": "redis"}
        )
        is not None
    )


def test_parking_gauges_drop_to_zero_when_a_consumer_has_nothing_parked() -> None:
    metrics.set_parked({"c-park": metrics.ParkedStats(3, 2, 40.0)})
    assert sample("effectively_once_parked_events", consumer="c-park") == 3
    assert sample("effectively_once_parked_aggregates", consumer="c-park") == 2
    assert sample("effectively_once_oldest_parked_event_age_seconds", consumer="c-park") == 40
    metrics.set_parked({})
    assert sample("effectively_once_parked_events", consumer="c-park") == 0
    assert sample("effectively_once_oldest_parked_event_age_seconds", consumer="c-park") == 0


def test_lag_shows_exactly_the_partitions_given() -> None:
    metrics.set_consumer_lag({("t", 0): 5, ("t", 1): 0})
    assert sample("effectively_once_consumer_lag", topic="t", partition="0") == 5
    metrics.set_consumer_lag({("t", 1): 2})
    assert (
        REGISTRY.get_sample_value("effectively_once_consumer_lag", {"topic": "t", "partition": "0"})
        is None
    )
    assert sample("effectively_once_consumer_lag", topic="t", partition="1") == 2


class Totals:
    lookups = 10
    hits = 4
    remembered = 6
    errors = 1
    short_circuits = 2


def test_prefilter_totals_and_circuit_are_exported() -> None:
    metrics.watch_prefilter(Totals())
    assert sample("effectively_once_prefilter_lookups_total") == 10
    assert sample("effectively_once_prefilter_hits_total") == 4
    assert sample("effectively_once_prefilter_errors_total") == 1
    assert sample("effectively_once_prefilter_short_circuits_total") == 2
    metrics.on_prefilter_circuit_change("closed", "open")
    assert sample("effectively_once_prefilter_circuit_open") == 1
    metrics.on_prefilter_circuit_change("open", "half-open")
    assert sample("effectively_once_prefilter_circuit_open") == 1
    metrics.on_prefilter_circuit_change("half-open", "closed")
    assert sample("effectively_once_prefilter_circuit_open") == 0
