"""Response-time percentile of a function served in batches, and the fewest replicas for an SLO.

Swayam (Middleware'17, §4.3 and appendix Theorem 2) finds the minimum number of backends by
convolving a waiting-time distribution with the measured computation-time distribution and
searching for the smallest count whose ``SL_min`` percentile stays within ``RT_max``. Its
backends serve one request at a time behind random dispatch (Eq. 1). Ours do not: the adapter
holds one deadline-ordered queue per function and sends *batches* of up to ``batch_limit``
requests, at most ``slots_per_replica`` (``containerConcurrency``) batches in flight per replica.
This module keeps Swayam's structure (wait distribution ⊛ service distribution, then a search)
and replaces the parts that depend on how requests reach a server. ``docs/advisor.md`` has the
derivation; in short, with ``c = replicas × slots_per_replica`` slots, arrival rate ``λ`` and
batch service time ``S(n)`` of mean ``S̄(n) = a + b·n``:

1. **Batch size** (greedy, work-conserving batching). A request that finds a free slot leaves at
   once, alone; one that finds every slot busy leaves at the next slot release with everything
   that queued meanwhile, about ``λ·S̄(n)/c`` requests. The mean batch size is the fixed point of
   ``n = 1 + P_wait(n)·λ·S̄(n)/c`` within ``[1, batch_limit]``.
2. **Probability of waiting**: Erlang C with ``c`` servers and offered load ``λ·S̄(n)/n`` (batches
   as customers). Exact for ``batch_limit = 1`` and exponential service (M/M/c).
3. **Wait given waiting**: exponential with rate ``θ = (c/S̄(n))·(1 − r^K)``, where ``r`` is the
   root in (0, 1) of Bailey's bulk-service equation ``μ·r^(K+1) − (λ+μ)·r + λ = 0`` with
   ``μ = c/S̄(n)`` and ``K = batch_limit``: the number of slot releases a waiting request needs
   is geometric. ``K = 1`` gives ``θ = cμ − λ`` (M/M/c); a large ``K`` gives the time to the next
   release. For non-exponential service the mean is scaled by ``(1 + C_s²)/2`` (Allen–Cunneen),
   which reproduces the Pollaczek–Khinchine mean for M/D/1.
4. **Response time** = wait + ``S(n)`` (+ ``collect_ms`` + ``overhead_ms``), Swayam's Theorem 2
   with the retry ladder replaced by the queue: ``P(T ≤ t) = (1 − P_wait)·F_S(t) +
   P_wait·P(E_θ + S ≤ t)``. The percentile is found by bisection.

Service times are log-normal by default (Swayam §3.2 measured log-normal computation times) with
mean ``S̄(n)`` and P95 equal to ``spread × S̄(n)``, the latency model's ``spread``;
``"exponential"`` and ``"deterministic"`` give the textbook cases the tests check.

Approximations (each discussed in ``docs/advisor.md``): Poisson arrivals; one mean batch size in
place of a batch-size distribution; batches treated as Poisson customers for Erlang C; an
exponential wait tail; slots independent (``containerConcurrency`` batches on one replica do
not slow each other beyond what the latency fit measured); several adapters treated as one queue.
``collect_ms`` is added in full, an upper bound on a deliberate wait for company.

Everything here is pure arithmetic: no clock, no state. Times are milliseconds, rates requests per
second, percentiles percent (``99.0`` for P99).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, Protocol

from slackwise_policies.fewest import fewest_meeting

__all__ = [
    "Distribution",
    "QueueState",
    "ServiceModel",
    "erlang_c",
    "min_replicas",
    "queue_state",
    "response_time_cdf",
    "response_time_percentile",
]

Distribution = Literal["lognormal", "exponential", "deterministic"]
_DISTRIBUTIONS: tuple[Distribution, ...] = ("lognormal", "exponential", "deterministic")
_Z95 = NormalDist().inv_cdf(0.95)
#: the largest P95/mean ratio a log-normal reaches (at σ = z95)
_MAX_LOGNORMAL_SPREAD = math.exp(_Z95 * _Z95 / 2.0)
#: points of the exponential wait's quantile grid used to convolve it with a log-normal service
_GRID = 256
_EXP_QUANTILES = tuple(-math.log(1.0 - (i + 0.5) / _GRID) for i in range(_GRID))
_BISECT_STEPS = 60


class _FittedLatency(Protocol):
    """What :meth:`ServiceModel.from_latency_model` reads from a latency model."""

    @property
    def a_ms(self) -> float: ...

    @property
    def b_ms_per_item(self) -> float: ...

    def spread(self, now: float) -> float: ...


def _finite(name: str, value: float, *, minimum: float | None = None) -> None:
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum:g}"
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")


def _check_percentile(percentile: float) -> None:
    if not (math.isfinite(percentile) and 0.0 < percentile < 100.0):
        raise ValueError(f"percentile must be within (0, 100) percent, got {percentile!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class ServiceModel:
    """How long a replica takes for a batch, and how many batches it takes at once.

    ``a_ms + b_ms_per_item·n`` is the mean round trip of a batch of ``n`` (the latency model's
    fit, at least ``floor_ms``); ``spread`` is its P95 over the mean (≥ 1; the latency model's
    :meth:`~slackwise_policies.latency.LatencyModel.spread`), used by the log-normal shape only.
    ``batch_limit`` is the batch cap in use (AIMD's limit within the function's max batch);
    ``slots_per_replica`` is ``containerConcurrency`` (Knative's 0, unlimited, counts as 1, as
    the dispatcher does).
    """

    a_ms: float
    b_ms_per_item: float = 0.0
    spread: float = 1.0
    batch_limit: int = 1
    slots_per_replica: int = 1
    distribution: Distribution = "lognormal"
    floor_ms: float = 0.1

    def __post_init__(self) -> None:
        _finite("a_ms", self.a_ms)
        _finite("b_ms_per_item", self.b_ms_per_item, minimum=0.0)
        _finite("spread", self.spread, minimum=1.0)
        if not (math.isfinite(self.floor_ms) and self.floor_ms > 0.0):
            raise ValueError(f"floor_ms must be > 0, got {self.floor_ms!r}")
        if isinstance(self.batch_limit, bool) or self.batch_limit < 1:
            raise ValueError(f"batch_limit must be an integer >= 1, got {self.batch_limit!r}")
        if isinstance(self.slots_per_replica, bool) or self.slots_per_replica < 1:
            raise ValueError(
                f"slots_per_replica must be an integer >= 1, got {self.slots_per_replica!r}"
            )
        if self.distribution not in _DISTRIBUTIONS:
            raise ValueError(
                f"distribution must be one of {', '.join(_DISTRIBUTIONS)}, "
                f"got {self.distribution!r}"
            )

    @classmethod
    def from_latency_model(
        cls,
        model: _FittedLatency,
        now: float,
        *,
        batch_limit: int,
        container_concurrency: int,
        distribution: Distribution = "lognormal",
    ) -> ServiceModel:
        """The service a function's latency model describes at ``now``, under the given limits."""
        return cls(
            a_ms=model.a_ms,
            b_ms_per_item=model.b_ms_per_item,
            spread=model.spread(now),
            batch_limit=batch_limit,
            slots_per_replica=max(1, container_concurrency),
            distribution=distribution,
        )

    def mean_ms(self, n: float) -> float:
        """Mean service time of a batch of ``n`` (``n`` may be fractional: a mean batch size)."""
        return max(self.floor_ms, self.a_ms + self.b_ms_per_item * n)

    @property
    def sigma(self) -> float:
        """The log-normal shape σ whose P95/mean equals ``spread`` (the smaller root; capped at
        z95, where the ratio peaks at about 3.87). 0 for the other shapes."""
        if self.distribution != "lognormal" or self.spread <= 1.0:
            return 0.0
        disc = _Z95 * _Z95 - 2.0 * math.log(min(self.spread, _MAX_LOGNORMAL_SPREAD))
        return _Z95 - math.sqrt(max(0.0, disc))

    @property
    def cv2(self) -> float:
        """Squared coefficient of variation of the service time."""
        if self.distribution == "exponential":
            return 1.0
        if self.distribution == "deterministic":
            return 0.0
        return math.expm1(self.sigma**2)

    def cdf(self, n: float, t_ms: float) -> float:
        """P(service of a batch of ``n`` ≤ ``t_ms``)."""
        if t_ms <= 0.0:
            return 0.0
        mean = self.mean_ms(n)
        if self.distribution == "exponential":
            return -math.expm1(-t_ms / mean)
        sigma = self.sigma
        if sigma == 0.0:
            return 1.0 if t_ms >= mean else 0.0
        mu = math.log(mean) - sigma * sigma / 2.0
        return 0.5 * math.erfc(-(math.log(t_ms) - mu) / (sigma * math.sqrt(2.0)))

    def quantile_ms(self, n: float, q: float) -> float:
        """The ``q`` quantile (0 < q < 1) of the service time of a batch of ``n``."""
        mean = self.mean_ms(n)
        if self.distribution == "exponential":
            return -mean * math.log1p(-q)
        sigma = self.sigma
        if sigma == 0.0:
            return mean
        return math.exp(math.log(mean) - sigma * sigma / 2.0 + sigma * NormalDist().inv_cdf(q))


@dataclass(frozen=True, slots=True)
class QueueState:
    """The model's intermediate numbers for ``rate`` on ``slots`` slots (for checks and logs).

    ``stable`` is False when even full batches cannot keep up (``λ·S̄(K)/(c·K) ≥ 1``); the other
    fields are then those of full batches and the wait is unbounded.
    """

    slots: int
    batch_size: float
    utilization: float
    wait_probability: float
    #: rate (per ms) of the exponential tail of the wait, Allen–Cunneen-scaled; 0 when unstable
    wait_rate_per_ms: float
    service_mean_ms: float
    stable: bool

    @property
    def mean_wait_ms(self) -> float:
        """Mean time in queue (before the batch is sent)."""
        if not self.stable:
            return math.inf
        if self.wait_probability == 0.0:
            return 0.0
        return self.wait_probability / self.wait_rate_per_ms


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in M/M/``servers`` with ``offered`` erlangs (1 if the
    load reaches the server count). Erlang B by its stable recursion, then C from B."""
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers!r}")
    _finite("offered", offered, minimum=0.0)
    if offered == 0.0:
        return 0.0
    if offered >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    return servers * b / (servers - offered * (1.0 - b))


def _bulk_root(lam: float, mu: float, k: int) -> float:
    """The root in (0, 1) of ``mu·r^(k+1) − (lam+mu)·r + lam`` (needs ``lam < k·mu``)."""
    if k == 1:
        return lam / mu
    # f(0) = lam > 0 and f is convex with its minimum (negative when stable) at r_min
    r_min: float = ((lam + mu) / (mu * (k + 1))) ** (1.0 / k)
    lo, hi = 0.0, min(r_min, 1.0)
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2.0
        if mu * mid ** (k + 1) - (lam + mu) * mid + lam > 0.0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _check_load(rate: float, replicas: int) -> None:
    _finite("rate", rate, minimum=0.0)
    if isinstance(replicas, bool) or replicas < 0:
        raise ValueError(f"replicas must be an integer >= 0, got {replicas!r}")


def queue_state(rate: float, replicas: int, service: ServiceModel) -> QueueState:
    """Batch size, utilization and wait of ``rate`` requests/s on ``replicas`` replicas."""
    _check_load(rate, replicas)
    slots = replicas * service.slots_per_replica
    limit = service.batch_limit
    if slots == 0:
        return QueueState(0, float(limit), math.inf, 1.0, 0.0, service.mean_ms(limit), rate == 0)
    lam = rate / 1000.0  # per ms
    if lam == 0.0:
        return QueueState(slots, 1.0, 0.0, 0.0, 0.0, service.mean_ms(1), True)
    full_load = lam * service.mean_ms(limit) / (slots * limit)
    if full_load >= 1.0:
        return QueueState(slots, float(limit), full_load, 1.0, 0.0, service.mean_ms(limit), False)

    def excess(n: float) -> float:
        wait = erlang_c(slots, lam * service.mean_ms(n) / n)
        return 1.0 + wait * lam * service.mean_ms(n) / slots - n

    n = 1.0
    if limit > 1:
        if excess(float(limit)) >= 0.0:
            n = float(limit)
        else:
            lo, hi = 1.0, float(limit)  # excess(1) ≥ 0 > excess(limit)
            for _ in range(_BISECT_STEPS):
                mid = (lo + hi) / 2.0
                if excess(mid) >= 0.0:
                    lo = mid
                else:
                    hi = mid
            n = (lo + hi) / 2.0
    mean = service.mean_ms(n)
    offered = lam * mean / n
    wait = erlang_c(slots, offered)
    mu_all = slots / mean
    root = _bulk_root(lam, mu_all, limit)
    theta = mu_all * (1.0 - root**limit) * 2.0 / (1.0 + service.cv2)
    return QueueState(slots, n, offered / slots, wait, theta, mean, True)


def _wait_then_service_cdf(service: ServiceModel, n: float, theta: float, t: float) -> float:
    """P(E + S ≤ t) for E ~ Exp(theta) (per ms) and S the service of a batch of ``n``."""
    if t <= 0.0:
        return 0.0
    mean = service.mean_ms(n)
    if service.distribution == "exponential":
        m = 1.0 / mean
        if abs(m - theta) <= 1e-12 * max(m, theta):
            return -math.expm1(-m * t) - m * t * math.exp(-m * t)
        return 1.0 - (m * math.exp(-theta * t) - theta * math.exp(-m * t)) / (m - theta)
    if service.sigma == 0.0:
        return -math.expm1(-theta * (t - mean)) if t > mean else 0.0
    # average F_S(t − w) over the wait's quantiles: smooth and monotone in t
    total = 0.0
    for q in _EXP_QUANTILES:
        w = q / theta
        if w >= t:
            break
        total += service.cdf(n, t - w)
    return total / _GRID


def _cdf(state: QueueState, service: ServiceModel, t: float) -> float:
    served = service.cdf(state.batch_size, t)
    if state.wait_probability == 0.0:
        return served
    waited = _wait_then_service_cdf(service, state.batch_size, state.wait_rate_per_ms, t)
    return (1.0 - state.wait_probability) * served + state.wait_probability * waited


def response_time_cdf(
    t_ms: float,
    rate: float,
    replicas: int,
    service: ServiceModel,
    *,
    collect_ms: float = 0.0,
    overhead_ms: float = 0.0,
) -> float:
    """P(response time ≤ ``t_ms``) for ``rate`` requests/s on ``replicas`` replicas."""
    _finite("t_ms", t_ms)
    _finite("collect_ms", collect_ms, minimum=0.0)
    _finite("overhead_ms", overhead_ms, minimum=0.0)
    state = queue_state(rate, replicas, service)
    if not state.stable or state.slots == 0:
        return 0.0
    return _cdf(state, service, t_ms - collect_ms - overhead_ms)


def response_time_percentile(
    rate: float,
    replicas: int,
    service: ServiceModel,
    percentile: float,
    *,
    collect_ms: float = 0.0,
    overhead_ms: float = 0.0,
) -> float:
    """The ``percentile`` (percent) response time in ms of ``rate`` requests/s on ``replicas``.

    ``math.inf`` when nothing can serve (no replica) or the load outruns full batches.
    ``collect_ms`` is a deliberate wait for company added in full (a batching window such as the
    adapter's ``max_wait_s``; 0 for work-conserving batching); ``overhead_ms`` is any fixed cost
    outside the latency fit (Swayam's ``d_1``; the fit already holds the round trip).
    """
    _check_percentile(percentile)
    _finite("collect_ms", collect_ms, minimum=0.0)
    _finite("overhead_ms", overhead_ms, minimum=0.0)
    state = queue_state(rate, replicas, service)
    if not state.stable or state.slots == 0:
        return math.inf
    q = percentile / 100.0
    shift = collect_ms + overhead_ms
    lo = service.quantile_ms(state.batch_size, q)  # the wait only adds to the service
    if state.wait_probability <= 1.0 - q:
        hi = lo
    else:
        hi = lo + math.log(state.wait_probability / (1.0 - q)) / state.wait_rate_per_ms
    hi = max(hi, lo) + 1e-9
    while _cdf(state, service, hi) < q:
        hi *= 2.0
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2.0
        if _cdf(state, service, mid) >= q:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-9 * hi:
            break
    return hi + shift


def min_replicas(
    rate: float,
    slo_ms: float,
    percentile: float,
    service: ServiceModel,
    *,
    max_replicas: int = 1000,
    collect_ms: float = 0.0,
    overhead_ms: float = 0.0,
) -> int:
    """The fewest replicas whose ``percentile`` response time is within ``slo_ms`` (Swayam's
    ``n_B``), or ``max_replicas`` when none up to it suffices (check with
    :func:`response_time_percentile`). 0 when ``rate`` is 0.

    The search starts at the stability bound ``⌈λ·S̄(K)/(K·slots)⌉`` and gallops then bisects,
    relying on the percentile falling as replicas are added (a property the tests check).
    """
    _check_percentile(percentile)
    _finite("slo_ms", slo_ms, minimum=0.0)
    _check_load(rate, 0)
    if isinstance(max_replicas, bool) or max_replicas < 1:
        raise ValueError(f"max_replicas must be an integer >= 1, got {max_replicas!r}")
    if rate == 0.0:
        return 0

    def meets(replicas: int) -> bool:
        value = response_time_percentile(
            rate, replicas, service, percentile, collect_ms=collect_ms, overhead_ms=overhead_ms
        )
        return value <= slo_ms

    limit = service.batch_limit
    capacity = limit * service.slots_per_replica * 1000.0 / service.mean_ms(limit)  # per replica
    low = max(1, math.floor(rate / capacity))  # below this the load outruns full batches
    return fewest_meeting(meets, low, max_replicas)
