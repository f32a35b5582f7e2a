"""Prometheus metrics of the adapter, on a registry of its own (one per app instance)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0,
                    5.0, 10.0, 30.0)  # fmt: skip
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class AdapterMetrics:
    """The adapter's gauges, counters and histograms, labelled by function."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_length = Gauge(
            "slackwise_queue_length", "Requests waiting in the function's queue", ["function"],
            registry=r,
        )  # fmt: skip
        self.inflight_batches = Gauge(
            "slackwise_inflight_batches", "Batches sent and not yet answered", ["function"],
            registry=r,
        )  # fmt: skip
        self.aimd_limit = Gauge(
            "slackwise_aimd_limit", "Current AIMD maximum batch size", ["function"], registry=r
        )
        self.batch_size = Histogram(
            "slackwise_batch_size", "Instances per dispatched batch", ["function"],
            buckets=_BATCH_BUCKETS, registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "slackwise_request_latency_seconds", "Arrival to answer", ["function"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.requests = Counter(
            "slackwise_requests", "Answered requests", ["function", "status"], registry=r
        )
        self.refused = Counter(
            "slackwise_refused", "Requests refused at the door (429/503 with Retry-After): they "
            "would have finished late", ["function"], registry=r,
        )  # fmt: skip
        self.deadline_misses = Counter(
            "slackwise_deadline_misses", "Requests answered after their deadline", ["function"],
            registry=r,
        )  # fmt: skip
        self.cold_batches = Counter(
            "slackwise_cold_start_batches", "Batches that met a cold start", ["function"],
            registry=r,
        )  # fmt: skip
        self.queue_delay = Histogram(
            "slackwise_queue_delay_seconds", "Arrival to dispatch in a batch", ["function"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.replicas = Gauge(
            "slackwise_replicas", "Replicas of the function, read when scraped: ready and "
            "desired (the platform's), owned (the count this adapter wrote) or floor (the "
            "min-scale it pinned)",
            ["function", "count"], registry=r,
        )  # fmt: skip
        self.app_requests = Counter(
            "slackwise_app_requests", "Answered requests of a chain of functions",
            ["app", "status"], registry=r,
        )  # fmt: skip
        self.app_latency = Histogram(
            "slackwise_app_request_latency_seconds", "A chain's arrival to answer", ["app"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.app_deadline_misses = Counter(
            "slackwise_app_deadline_misses", "Chain requests answered after their deadline, or "
            "failed", ["app"], registry=r,
        )  # fmt: skip
        self.app_cold = Counter(
            "slackwise_app_cold_requests", "Chain requests that met a stage with no ready replica",
            ["app"], registry=r,
        )  # fmt: skip
        self.timeout_dispatches = Counter(
            "slackwise_timeout_dispatches", "Batches sent because waiting longer would miss",
            ["function"], registry=r,
        )  # fmt: skip

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
