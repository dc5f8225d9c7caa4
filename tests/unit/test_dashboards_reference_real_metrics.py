"""Dashboards and alerts reference real metrics.

Contract: every ``effectively_once_*`` name in ``ops/grafana-dashboard.json`` and
``ops/prometheus-alerts.yml`` is a series that ``app.metrics.REGISTRY`` exports
(a counter as ``_total``, a histogram as ``_bucket``/``_count``/``_sum``), so a
renamed metric cannot leave a panel empty or an alert silent; every alert has an
expression, a severity and a summary.
"""

from __future__ import annotations

import yaml

from app.metrics import REGISTRY
from tests.metric_names import ALERTS, referenced_names, series_names


def test_every_referenced_metric_is_defined() -> None:
    exported = series_names(REGISTRY.collect())
    for file_name, names in referenced_names().items():
        assert names, f"{file_name} references no effectively_once_* metric"
        assert names <= exported, f"{file_name}: not defined in app/metrics.py: {names - exported}"


def test_the_alerts_cover_the_operational_failures() -> None:
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    by_name = {rule["alert"]: rule for rule in rules}
    wanted = {
        "EffectivelyOnceNoProgress": "effectively_once_consumer_lag",
        "EffectivelyOnceParkedEventTooOld": "effectively_once_oldest_parked_event_age_seconds",
        "EffectivelyOnceDeadLettersRising": "effectively_once_dlt_records_total",
        "EffectivelyOncePrefilterCircuitOpen": "effectively_once_prefilter_circuit_open",
        "EffectivelyOnceInfrastructurePause": "effectively_once_paused",
        "EffectivelyOnceOutboxPendingTooOld": "effectively_once_outbox_oldest_pending_age_seconds",
        "EffectivelyOnceOutboxRowsDead": "effectively_once_outbox_dead_total",
        "EffectivelyOnceFailureRecordsUnpublished": "effectively_once_unpublished_failure_records",
        "EffectivelyOnceRelayDown": "effectively_once_relay_last_poll_timestamp_seconds",
    }
    for alert, metric in wanted.items():
        assert metric in by_name[alert]["expr"], alert
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
