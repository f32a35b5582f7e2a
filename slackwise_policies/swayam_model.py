"""Swayam's own resource model (Middleware'17 §4.5 and appendix), for paper-faithful runs.

Backends serve one request at a time behind **random dispatch** (RAND): a request goes to a
random backend; a busy one bounces it, and the frontend retries another after ``Δ``. With ``n``
backends each busy with probability ``ρ = λ/(n·μ)`` (Eq. 2), a request finds an idle backend after
``r`` retries with probability ``ρ^r·(1 − ρ)`` (Eq. 4) and has then waited
``WT_r = r·(d1 + d2 + Δ) + d1`` (Eq. 5). So (Theorem 2, Eq. 7)::

    P(R ≤ t) = Σ_{r=0}^{r_max} ρ^r · (1 − ρ) · CDF_exe(t − WT_r),   r_max = ⌊(t − d1)/(d1+d2+Δ)⌋

and the ``p``-th percentile wait is Eq. 1, ``ω_p = d1 + (ln(1 − p/100)/ln ρ − 1)·(d1 + d2 + Δ)``.
The execution time is one request's (``n = 1`` of the :class:`ServiceModel`): Swayam's backends
do not batch. ``mu`` counts every slot as a backend (``replicas × slots_per_replica``).

This is the model to compare against Swayam as published; :mod:`slackwise_policies.percentile` is
the one for how the adapter actually serves (one queue, batches). Pure arithmetic: milliseconds,
requests per second, percent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slackwise_policies.percentile import ServiceModel

__all__ = [
    "RandDispatch",
    "rand_min_replicas",
    "rand_response_cdf",
    "rand_response_percentile_ms",
    "rand_wait_percentile_ms",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RandDispatch:
    """The network and retry delays of RAND (ms): frontend→backend ``d1``, backend→frontend
    ``d2``, and the enforced gap ``delta`` between two tries of one request."""

    d1_ms: float = 0.5
    d2_ms: float = 0.5
    delta_ms: float = 1.0

    def __post_init__(self) -> None:
        for name in ("d1_ms", "d2_ms", "delta_ms"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.step_ms <= 0.0:
            raise ValueError("d1_ms + d2_ms + delta_ms must be positive")

    @property
    def step_ms(self) -> float:
        """One retry's cost, ``d1 + d2 + Δ``."""
        return self.d1_ms + self.d2_ms + self.delta_ms


def _busy(rate: float, replicas: int, service: ServiceModel) -> float:
    """``ρ = λ / (n·μ)`` with one request's mean execution time."""
    if replicas <= 0:
        return math.inf
    mu = 1000.0 / service.mean_ms(1)  # requests per second per backend
    return rate / (replicas * service.slots_per_replica * mu)


def rand_wait_percentile_ms(
    rate: float, replicas: int, service: ServiceModel, percentile: float, rand: RandDispatch
) -> float:
    """Eq. 1: the ``percentile`` waiting time; inf when the backends are saturated."""
    rho = _busy(rate, replicas, service)
    if rho >= 1.0:
        return math.inf
    if rho <= 0.0:
        return rand.d1_ms
    tries = math.log(1.0 - percentile / 100.0) / math.log(rho)
    return rand.d1_ms + max(0.0, tries - 1.0) * rand.step_ms


def rand_response_cdf(
    rate: float, replicas: int, service: ServiceModel, t_ms: float, rand: RandDispatch
) -> float:
    """Theorem 2 (Eq. 7): ``P(response time ≤ t_ms)``."""
    rho = _busy(rate, replicas, service)
    if rho >= 1.0 or t_ms < rand.d1_ms:
        return 0.0
    r_max = math.floor((t_ms - rand.d1_ms) / rand.step_ms)
    total, weight = 0.0, 1.0 - rho
    for r in range(r_max + 1):
        total += weight * service.cdf(1, t_ms - (r * rand.step_ms + rand.d1_ms))
        weight *= rho
        if weight < 1e-12:
            break
    return total


def rand_response_percentile_ms(
    rate: float, replicas: int, service: ServiceModel, percentile: float, rand: RandDispatch
) -> float:
    """The ``percentile`` response time under RAND, by bisection on Eq. 7 (inf if saturated)."""
    if _busy(rate, replicas, service) >= 1.0:
        return math.inf
    target = percentile / 100.0
    low = 0.0
    high = max(1.0, rand_wait_percentile_ms(rate, replicas, service, percentile, rand))
    high += service.quantile_ms(1, min(0.999999, target))
    while rand_response_cdf(rate, replicas, service, high, rand) < target:
        low, high = high, high * 2.0
        if high > 1e9:
            return math.inf
    for _ in range(60):
        mid = (low + high) / 2.0
        if rand_response_cdf(rate, replicas, service, mid, rand) >= target:
            high = mid
        else:
            low = mid
        if high - low < 1e-3:
            break
    return high


def rand_min_replicas(
    rate: float,
    slo_ms: float,
    percentile: float,
    service: ServiceModel,
    rand: RandDispatch,
    *,
    max_replicas: int = 1000,
) -> int:
    """Swayam's ``n_B``: the fewest backends whose ``percentile`` response time under RAND is
    within ``slo_ms`` (``max_replicas`` when none up to it is); 0 when ``rate`` is 0."""
    if rate <= 0.0:
        return 0
    low = max(1, math.ceil(_busy(rate, 1, service) - 1e-12))  # at least stable
    for replicas in range(low, max_replicas + 1):
        if rand_response_percentile_ms(rate, replicas, service, percentile, rand) <= slo_ms:
            return replicas
    return max_replicas
