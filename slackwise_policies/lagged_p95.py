"""The P95 a controller's decisions read, refreshed every few batches rather than after each
(``BatchingSettings.p95_every``)."""

from __future__ import annotations

import math

from slackwise_policies.latency import LatencyModel

__all__ = ["LaggedP95"]


class LaggedP95:
    """A function's :class:`LatencyModel` as the scheduler reads it, with the P95 refreshed
    every ``every`` warm batches or ``max_age_s`` of virtual time rather than after each one.

    The model's P95 where a batch size's window is thin is ``estimate × spread``, and the
    spread is a nearest-rank percentile over up to 1024 recent ratios, recomputed (a sort)
    after every observed batch. At millions of batches that sort is most of the run; a P95 a
    few batches old changes no decision that matters (it only sets the dispatch timeout, and
    with ``max_wait_ms: 0`` only the timeout's label). ``estimate_ms`` is the model's own.
    """

    __slots__ = (
        "_cache",
        "_filled_at",
        "_filled_samples",
        "estimate_ms",
        "every",
        "largest_measured_batch",
        "max_age_s",
        "model",
    )

    def __init__(self, model: LatencyModel, *, every: int, max_age_s: float) -> None:
        self.model = model
        self.estimate_ms = model.estimate_ms
        self.largest_measured_batch = model.largest_measured_batch
        self.every = every
        self.max_age_s = max_age_s
        self._cache: dict[int, float] = {}
        self._filled_at = -math.inf
        self._filled_samples = -every

    def p99_ms(self, n: int, now: float) -> float:
        """The model's own (only the door's batches read it, and they are live)."""
        return self.model.p99_ms(n, now)

    def p95_ms(self, n: int, now: float) -> float:
        model = self.model
        if (
            model.warm_samples - self._filled_samples >= self.every
            or now - self._filled_at >= self.max_age_s
        ):
            self._cache.clear()
            self._filled_at = now
            self._filled_samples = model.warm_samples
        value = self._cache.get(n)
        if value is None:
            value = self._cache[n] = model.p95_ms(n, now)
        return value
