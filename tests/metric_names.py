"""Which metric names the ops files reference, and which names a registry or scrape exposes.

Shared by the unit test (against ``app.metrics.REGISTRY``) and the integration test
(against a live worker's ``/metrics``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.metrics_core import Metric

OPS = Path(__file__).resolve().parents[1] / "ops"
DASHBOARD = OPS / "grafana-dashboard.json"
ALERTS = OPS / "prometheus-alerts.yml"

_NAME = re.compile(r"\beffectively_once_[a-z0-9_]*[a-z0-9]")

# The series names Prometheus stores for a family of each type.
_SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("", "_count", "_sum"),
    "info": ("_info",),
    "stateset": ("",),
    "unknown": ("",),
}


def referenced_names() -> dict[str, set[str]]:
    """File name -> every ``effectively_once_*`` name in its parsed strings."""
    dashboard = json.loads(DASHBOARD.read_text())
    alerts = yaml.safe_load(ALERTS.read_text())
    return {
        DASHBOARD.name: _names_in(dashboard),
        ALERTS.name: _names_in(alerts),
    }


def series_names(families: Iterable[Metric]) -> set[str]:
    """The series names PromQL can select for ``families`` (``_total``, ``_bucket``...)."""
    return {family.name + suffix for family in families for suffix in _SUFFIXES[family.type]}


def _names_in(document: Any) -> set[str]:
    return {name for text in _strings(document) for name in _NAME.findall(text)}


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
