"""What a chain's stage deadlines are computed from: each stage's latency at the batch sizes in use.

GrandSLAM (seed 000, Eq. 4) splits an app's SLO over its stages in proportion to each stage's
latency "at the batch sizes in use". Both the live adapter (``POST /v1/apps/{app}:predict``) and
the simulator take that vector from here, so the rule exists once: a :class:`BatchSizeTracker`
per function follows the sizes of the batches it dispatches, and :func:`stage_estimates` reads
every stage's :class:`slackwise_policies.batching.LatencyEstimator` at its tracked size. The result
is the
``estimates_ms`` argument of :meth:`slackwise_policies.slack.StagePolicy.stage_deadline`.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from slackwise_policies.batching import LatencyEstimator

__all__ = ["BatchSizeTracker", "stage_estimates", "stage_gains"]


def stage_gains(models: Sequence[LatencyEstimator], batch_sizes: Sequence[float]) -> list[float]:
    """Each stage's gain from batching at its size in use: how much a request's share of the
    batch time falls when the batch doubles, ``1 − L(2n) / (2·L(n))``, within [0, 1] (0: a
    batch twice as large takes twice as long or more)."""
    if len(models) != len(batch_sizes):
        raise ValueError(
            f"one batch size per stage: {len(models)} stages, {len(batch_sizes)} sizes"
        )
    out = []
    for m, size in zip(models, batch_sizes, strict=True):
        n = max(1, round(size))
        single = m.estimate_ms(n)
        out.append(
            0.0 if single <= 0 else max(0.0, min(1.0, 1.0 - m.estimate_ms(2 * n) / (2 * single)))
        )
    return out


def stage_estimates(
    models: Sequence[LatencyEstimator],
    batch_sizes: Sequence[float],
    queued: Sequence[int] | None = None,
    slots: Sequence[int] | None = None,
) -> list[float]:
    """Each stage's estimated batch latency (ms) at its batch size in use.

    A size is rounded to the nearest whole batch and never below 1 (a stage that has not
    batched yet is judged at batch size 1). With ``queued`` (requests waiting at each stage)
    and ``slots`` (batches each stage runs at once), each estimate is the stage's ETC with the
    queueing term of GrandSLAM's Eq. 1: ``L(n) · (1 + queued / (n · slots))``, the batch rounds
    queued ahead of a request entering the stage, then its own.
    """
    if len(models) != len(batch_sizes):
        raise ValueError(
            f"one batch size per stage: {len(models)} stages, {len(batch_sizes)} sizes"
        )
    sizes = [max(1, round(n)) for n in batch_sizes]
    base = [m.estimate_ms(n) for m, n in zip(models, sizes, strict=True)]
    if queued is None:
        return base
    if slots is None or len(queued) != len(models) or len(slots) != len(models):
        raise ValueError("queued and slots need one value per stage")
    return [
        b * (1.0 + max(0, q) / (n * max(1, s)))
        for b, n, q, s in zip(base, sizes, queued, slots, strict=True)
    ]


class BatchSizeTracker:
    """Exponentially weighted mean of a function's dispatched batch sizes.

    ``alpha`` is the weight of the newest batch; the first batch sets the mean. Before any batch
    the mean is ``initial`` (1: a function that has not batched is priced at batch size 1).
    """

    __slots__ = ("_alpha", "_seen", "mean")

    def __init__(self, *, alpha: float = 0.05, initial: float = 1.0) -> None:
        if not (math.isfinite(alpha) and 0.0 < alpha <= 1.0):
            raise ValueError(f"alpha must be within (0, 1], got {alpha!r}")
        if not (math.isfinite(initial) and initial >= 1.0):
            raise ValueError(f"initial must be >= 1, got {initial!r}")
        self._alpha = alpha
        self.mean = initial
        self._seen = False

    def observe(self, n: int) -> None:
        """Count one dispatched batch of ``n`` instances."""
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n!r}")
        if self._seen:
            self.mean += self._alpha * (n - self.mean)
        else:
            self.mean = float(n)
            self._seen = True
