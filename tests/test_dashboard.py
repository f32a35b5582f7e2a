"""The Grafana dashboard asks only for metrics the adapter really exports (a renamed metric
would leave a panel silently empty), and ships in the manifests for Grafana's sidecar."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from prometheus_client.metrics_core import Metric

from adapter.serving.metrics import AdapterMetrics
from knative.cluster.dashboard import PANELS, dashboard, dashboard_configmap

#: what Prometheus stores for each kind of metric family
_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",),
             "histogram": ("_bucket", "_sum", "_count", "_created")}  # fmt: skip


def exported() -> set[str]:
    families: list[Metric] = list(AdapterMetrics().registry.collect())
    return {f.name + s for f in families for s in _SUFFIXES[f.type]}


def queried() -> set[str]:
    return {
        name
        for _, _, queries in PANELS
        for expr, _ in queries
        for name in re.findall(r"\b(slackwise_[a-z_]+)\b", expr)
    }


def test_every_metric_a_panel_queries_is_exported_by_the_adapter() -> None:
    names = queried()
    assert len(names) >= 12
    assert names - exported() == set()


def test_the_check_catches_a_renamed_metric() -> None:
    assert "slackwise_deadline_misses_total" in exported()
    assert "slackwise_deadline_miss_total" not in exported()


def test_the_dashboard_covers_what_operators_watch() -> None:
    text = json.dumps(dashboard())
    for metric in ("deadline_misses", "refused", "queue_delay", "replicas", "cold_start",
                   "app_deadline_misses", "batch_size", "request_latency"):  # fmt: skip
        assert f"slackwise_{metric}" in text, metric
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels) == len(PANELS)
    assert all(p["targets"] and p["datasource"]["uid"] == "${datasource}" for p in panels)


def test_the_configmap_carries_the_same_json_for_the_sidecar() -> None:
    cm = dashboard_configmap("ml", {"app.kubernetes.io/part-of": "slackwise"})
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "ml"
    assert json.loads(cm["data"]["slackwise.json"]) == dashboard()


def test_the_command_prints_it() -> None:
    done = subprocess.run([sys.executable, "-m", "slackwise_cli.main", "dashboard"],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert json.loads(done.stdout) == dashboard()
