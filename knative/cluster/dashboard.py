"""An importable Grafana dashboard of the adapter's metrics (and a ConfigMap carrying it, labelled
for Grafana's dashboard sidecar): SLO misses, goodput, refusals, queue delay, latency, batch
size, replicas owned vs Knative's, cold starts, per function and per chain.

Every query names metrics the adapter exports (``adapter.serving.metrics``; a test checks each
name against its registry, so a renamed metric cannot leave a panel silently empty).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["PANELS", "dashboard", "dashboard_configmap"]

_WINDOW = "[$__rate_interval]"

#: (title, unit, [(query, legend)]): one time-series panel each, two to a row
PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    (
        "SLO misses (share of answers)",
        "percentunit",
        (
            (
                f"sum by (function) (rate(slackwise_deadline_misses_total{_WINDOW})) / "
                f"sum by (function) (rate(slackwise_requests_total{_WINDOW}))",
                "{{function}}",
            ),
        ),
    ),
    (
        "Goodput (answers in time per second)",
        "reqps",
        (
            (
                f"sum by (function) (rate(slackwise_requests_total{_WINDOW})) - "
                f"sum by (function) (rate(slackwise_deadline_misses_total{_WINDOW}))",
                "{{function}}",
            ),
        ),
    ),
    (
        "Refused at the door (would be late; 429/503 + Retry-After)",
        "reqps",
        ((f"sum by (function) (rate(slackwise_refused_total{_WINDOW}))", "{{function}}"),),
    ),
    (
        "Queue delay P95 (arrival to dispatch)",
        "s",
        (
            (
                "histogram_quantile(0.95, sum by (function, le) "
                f"(rate(slackwise_queue_delay_seconds_bucket{_WINDOW})))",
                "{{function}}",
            ),
        ),
    ),
    (
        "Latency P95 and P99 (arrival to answer)",
        "s",
        (
            (
                "histogram_quantile(0.95, sum by (function, le) "
                f"(rate(slackwise_request_latency_seconds_bucket{_WINDOW})))",
                "{{function}} P95",
            ),
            (
                "histogram_quantile(0.99, sum by (function, le) "
                f"(rate(slackwise_request_latency_seconds_bucket{_WINDOW})))",
                "{{function}} P99",
            ),
        ),
    ),
    (
        "Mean batch size and the AIMD limit",
        "none",
        (
            (
                f"sum by (function) (rate(slackwise_batch_size_sum{_WINDOW})) / "
                f"sum by (function) (rate(slackwise_batch_size_count{_WINDOW}))",
                "{{function}} mean",
            ),
            ("max by (function) (slackwise_aimd_limit)", "{{function}} limit"),
        ),
    ),
    (
        "Replicas: owned by the adapter vs Knative's",
        "none",
        (("max by (function, count) (slackwise_replicas)", "{{function}} {{count}}"),),
    ),
    (
        "Queue length and batches in flight",
        "none",
        (
            ("sum by (function) (slackwise_queue_length)", "{{function}} queued"),
            ("sum by (function) (slackwise_inflight_batches)", "{{function}} in flight"),
        ),
    ),
    (
        "Cold starts (batches that met one; chain requests that met one)",
        "ops",
        (
            (
                f"sum by (function) (rate(slackwise_cold_start_batches_total{_WINDOW}))",
                "{{function}}",
            ),
            (f"sum by (app) (rate(slackwise_app_cold_requests_total{_WINDOW}))", "app {{app}}"),
        ),
    ),
    (
        "Chains: SLO misses and P95",
        "percentunit",
        (
            (
                f"sum by (app) (rate(slackwise_app_deadline_misses_total{_WINDOW})) / "
                f"sum by (app) (rate(slackwise_app_requests_total{_WINDOW}))",
                "{{app}} misses",
            ),
        ),
    ),
    (
        "Chains: latency P95",
        "s",
        (
            (
                "histogram_quantile(0.95, sum by (app, le) "
                f"(rate(slackwise_app_request_latency_seconds_bucket{_WINDOW})))",
                "{{app}}",
            ),
        ),
    ),
    (
        "Dispatches forced by the deadline (MLProxy's timeout)",
        "ops",
        (
            (
                f"sum by (function) (rate(slackwise_timeout_dispatches_total{_WINDOW}))",
                "{{function}}",
            ),
        ),
    ),
)


def dashboard() -> dict[str, Any]:
    """The dashboard, as Grafana's import takes it (a Prometheus data source chosen on import)."""
    panels = []
    for i, (title, unit, queries) in enumerate(PANELS):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + k), "expr": expr, "legendFormat": legend}
                    for k, (expr, legend) in enumerate(queries)
                ],
            }
        )
    return {
        "title": "slackwise",
        "uid": "slackwise-adapter",
        "tags": ["slackwise", "knative", "inference"],
        "schemaVersion": 39,
        "time": {"from": "now-30m", "to": "now"},
        "refresh": "10s",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                }
            ]
        },
        "panels": panels,
    }


def dashboard_configmap(namespace: str | None, labels: dict[str, str]) -> dict[str, Any]:
    """The dashboard in a ConfigMap that Grafana's sidecar loads (label ``grafana_dashboard``)."""
    metadata: dict[str, Any] = {
        "name": "slackwise-grafana-dashboard",
        "labels": {**labels, "grafana_dashboard": "1"},
    }
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"slackwise.json": json.dumps(dashboard(), indent=2)},
    }
