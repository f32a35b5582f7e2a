"""Prometheus metrics of the adapter, on a registry of its own (one per app instance)."""

from __future__ import annotations

from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0,
                    10.0, 30.0)  # fmt: skip
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class AdapterMetrics:
    """The adapter's gauges, counters and histograms, labelled by function."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        gauge, counter = partial(Gauge, registry=r), partial(Counter, registry=r)
        seconds = partial(Histogram, registry=r, buckets=_LATENCY_BUCKETS)
        fn, app = ["function"], ["app"]
        self.queue_length = gauge(
            "slackwise_queue_length", "Requests waiting in the function's queue", fn
        )
        self.inflight_batches = gauge(
            "slackwise_inflight_batches", "Batches sent and not yet answered", fn
        )
        self.aimd_limit = gauge("slackwise_aimd_limit", "Current AIMD maximum batch size", fn)
        self.batch_size = Histogram(
            "slackwise_batch_size",
            "Instances per dispatched batch",
            fn,
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.latency = seconds("slackwise_request_latency_seconds", "Arrival to answer", fn)
        self.requests = counter("slackwise_requests", "Answered requests", ["function", "status"])
        self.refused = counter(
            "slackwise_refused",
            "Requests refused at the door (429/503 with Retry-After): they "
            "would have finished late",
            fn,
        )
        self.deadline_misses = counter(
            "slackwise_deadline_misses", "Requests answered after their deadline", fn
        )
        self.cold_batches = counter(
            "slackwise_cold_start_batches", "Batches that met a cold start", fn
        )
        self.queue_delay = seconds(
            "slackwise_queue_delay_seconds", "Arrival to dispatch in a batch", fn
        )
        self.replicas = gauge(
            "slackwise_replicas",
            "Replicas of the function, read when scraped: ready and "
            "desired (the platform's), owned (the count this adapter wrote) or floor (the "
            "min-scale it pinned)",
            ["function", "count"],
        )
        self.app_requests = counter(
            "slackwise_app_requests", "Answered requests of a chain of functions", ["app", "status"]
        )
        self.app_latency = seconds(
            "slackwise_app_request_latency_seconds", "A chain's arrival to answer", app
        )
        self.app_deadline_misses = counter(
            "slackwise_app_deadline_misses",
            "Chain requests answered after their deadline, or failed",
            app,
        )
        self.app_cold = counter(
            "slackwise_app_cold_requests",
            "Chain requests that met a stage with no ready replica",
            app,
        )
        self.timeout_dispatches = counter(
            "slackwise_timeout_dispatches", "Batches sent because waiting longer would miss", fn
        )

    def app_answered(
        self, app: str, status: int, seconds: float, *, missed: bool, cold: bool
    ) -> None:
        """One request of chain ``app`` answered (or failed) after ``seconds``."""
        self.app_requests.labels(app=app, status=str(status)).inc()
        self.app_latency.labels(app=app).observe(seconds)
        if missed:
            self.app_deadline_misses.labels(app=app).inc()
        if cold:
            self.app_cold.labels(app=app).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
