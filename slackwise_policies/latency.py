"""Batch latency of one function: an online linear fit and a windowed P95 per batch size.

Two papers meet here:

* GrandSLAM (EuroSys'19) §3.2 estimates a stage's completion time with a linear regression on the
  sharing degree, ``latency ≈ a + b·n`` (Eq. 2), one model per function and input size. This
  module refits ``a`` and ``b`` online by weighted least squares over running sums with
  exponential forgetting (a half-life counted in samples), so the fit follows a function whose
  speed drifts. :class:`LatencyModels` keeps one model per input-size class.
* MLProxy (SEAMS'22) §2.2 keeps a sliding window of observed response times per batch size and
  reads the 95th percentile from it (the Smart Monitor). :meth:`LatencyModel.p95_ms` returns that
  observed P95 when the window at that exact batch size holds at least ``min_samples`` samples.

Rules chosen where the papers leave room:

* **What is fitted.** The round trip the adapter sees (queueing excluded, network and
  serialization included), because deadlines are met or missed on that. The function's own
  compute time is fitted too (:meth:`LatencyModel.compute_estimate_ms`) for reporting.
* **Cold samples** (a replica's first request, a platform cold start) are counted in
  :attr:`LatencyModel.cold_samples` and kept out of the fit and of every window: one slow start
  must not teach the model that batches are slow.
* **Prior.** A fresh model starts from a profile's ``a_ms`` and ``b_ms_per_item``. The fitted
  slope is a ridge estimate pulled toward the prior slope with weight ``prior_strength``
  (``b = (Sxy + τ·b₀) / (Sxx + τ)`` on centred sums), so with one batch size seen so far the
  slope is the prior's and the intercept moves to the observed mean. The slope is never negative
  (a larger batch never finishes sooner); estimates never go below ``floor_ms`` (profiles may have
  a negative intercept).
* **P95 where the window is thin.** Fewer than ``min_samples`` samples at batch size ``n``: the
  estimate is ``estimate_ms(n) × spread``, where ``spread`` is the P95 of the ratios
  ``observed / fitted`` over every warm sample in the window (all batch sizes pooled), once the
  pool holds ``min_samples``; before that, the prior's spread. The spread is at least 1.
* **Bounded memory.** Windows are kept per exact batch size (batch sizes are bounded by the
  function's max batch), each a deque of at most ``max_samples_per_size`` samples younger than
  ``window_s``, also kept sorted, so a nearest-rank percentile is a lookup. The P95 is
  not forced to grow with ``n``: an observed P95 at one size may sit below the fit's at a smaller
  size; :func:`slackwise_policies.batching.decide` checks each candidate size on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Literal, TypedDict, Unpack, get_args

from slackwise_policies.latency_curve import Curve, interpolate, prior_points
from slackwise_policies.latency_window import Window, nearest_rank

__all__ = [
    "LATENCY_MODELS",
    "LatencyModel",
    "LatencyModelKind",
    "LatencyModels",
    "LatencySettings",
    "RunningFit",
]

#: how a function's batch latency is estimated (``adapter.latency_model``): ``linear``, GrandSLAM's
#: Eq. 2 fit, or ``curve``, the measured latency of each batch size where it was measured
LatencyModelKind = Literal["linear", "curve"]
LATENCY_MODELS: tuple[LatencyModelKind, ...] = get_args(LatencyModelKind)


def _check_finite(name: str, value: float, *, minimum: float = 0.0) -> None:
    if not math.isfinite(value) or value < minimum:
        raise ValueError(f"{name} must be a finite number >= {minimum}, got {value!r}")


class RunningFit:
    """Weighted least squares of ``y`` on ``x`` with exponential forgetting and a ridge prior."""

    __slots__ = ("_decay", "_prior_a", "_prior_b", "_tau", "_w", "_wx", "_wxx", "_wxy", "_wy")

    def __init__(self, prior_a: float, prior_b: float, decay: float, tau: float) -> None:
        self._prior_a = prior_a
        self._prior_b = prior_b
        self._decay = decay
        self._tau = tau
        self._w = self._wx = self._wy = self._wxx = self._wxy = 0.0

    def add(self, x: float, y: float) -> None:
        d = self._decay
        self._w = d * self._w + 1.0
        self._wx = d * self._wx + x
        self._wy = d * self._wy + y
        self._wxx = d * self._wxx + x * x
        self._wxy = d * self._wxy + x * y

    def coefficients(self) -> tuple[float, float]:
        """``(a, b)``: the prior with no samples, else the ridge fit with ``b ≥ 0``."""
        if self._w <= 0.0:
            return self._prior_a, self._prior_b
        mean_x = self._wx / self._w
        mean_y = self._wy / self._w
        sxx = max(0.0, self._wxx - self._wx * mean_x)
        sxy = self._wxy - self._wx * mean_y
        b = max(0.0, (sxy + self._tau * self._prior_b) / (sxx + self._tau))
        return mean_y - b * mean_x, b


#: how long, at most, the tail cap of :meth:`LatencyModel.p99_ms` is read from one reading of
#: the windows (seconds; a new sample reads them again at once)
CAP_REFRESH_S = 0.05


class LatencySettings(TypedDict, total=False):
    """:class:`LatencyModel`'s settings beyond its prior (the constructor holds the defaults)."""

    half_life_samples: float
    window_s: float
    min_samples: int
    max_samples_per_size: int
    prior_strength: float
    floor_ms: float
    curve: bool
    prior_curve: Mapping[int, float] | None


class LatencyModel:
    """Round-trip latency of batches of one function (one input-size class), in milliseconds.

    Pure: no clock of its own; every method that needs time takes ``now`` (monotonic seconds).
    """

    def __init__(
        self,
        *,
        a_ms: float,
        b_ms_per_item: float,
        spread: float = 1.2,
        half_life_samples: float = 100.0,
        window_s: float = 30.0,
        min_samples: int = 10,
        max_samples_per_size: int = 256,
        prior_strength: float = 1.0,
        floor_ms: float = 0.1,
        curve: bool = False,
        prior_curve: Mapping[int, float] | None = None,
    ) -> None:
        if not math.isfinite(a_ms):
            raise ValueError(f"a_ms must be finite, got {a_ms!r}")
        _check_finite("b_ms_per_item", b_ms_per_item)
        _check_finite("spread", spread, minimum=1.0)
        _check_finite("half_life_samples", half_life_samples, minimum=1.0)
        _check_finite("prior_strength", prior_strength)
        _check_finite("floor_ms", floor_ms)
        if not (math.isfinite(window_s) and window_s > 0):
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        if min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {min_samples!r}")
        if max_samples_per_size < min_samples:
            raise ValueError(
                f"max_samples_per_size must be >= min_samples ({min_samples}), "
                f"got {max_samples_per_size!r}"
            )
        decay = 0.5 ** (1.0 / half_life_samples)
        self._prior_spread = spread
        self._window_s = window_s
        self._min_samples = min_samples
        self._max_samples = max_samples_per_size
        self._floor_ms = floor_ms
        self._round_trip = RunningFit(a_ms, b_ms_per_item, decay, prior_strength)
        self._compute = RunningFit(a_ms, b_ms_per_item, decay, prior_strength)
        self._coef = self._round_trip.coefficients()
        self._by_size: dict[int, Window] = {}
        self._ratios = Window(window_s, 4 * max_samples_per_size)
        #: follow the measured curve (see :meth:`estimate_ms`) instead of the line alone
        self.curve = curve
        #: a profile's measured median by batch size: the curve where nothing was measured yet
        self._prior_curve = prior_points(prior_curve)
        self._curve: Curve | None = None
        if curve and self._prior_curve:
            self._curve = self._fit_curve(0.0)
        self.warm_samples = 0
        self.cold_samples = 0
        #: the quantile :meth:`p99_ms` reads: what the door prices a batch at and the batcher
        #: judges a batch's head by behind a door (0.99 everywhere the adapter runs;
        #: ``benchmarks/door_flood.py --tail-quantile`` sweeps it on a host that stalls)
        self.tail_quantile = 0.99
        #: the least measured tail at each size and above (_tail_cap), and when it was read
        #: (time, warm samples)
        self._caps_at: tuple[float, int] = (-math.inf, -1)
        self._caps: list[tuple[int, float]] = []

    @classmethod
    def from_prior(
        cls,
        a_ms: float,
        b_ms_per_item: float,
        spread: float = 1.2,
        **settings: Unpack[LatencySettings],
    ) -> LatencyModel:
        """A model that answers from a profile's ``linear_fit`` until traffic teaches it more
        (the other settings and their defaults are the constructor's)."""
        return cls(a_ms=a_ms, b_ms_per_item=b_ms_per_item, spread=spread, **settings)

    @property
    def a_ms(self) -> float:
        """The fitted intercept (GrandSLAM Eq. 2 ``a``)."""
        return self._coef[0]

    @property
    def b_ms_per_item(self) -> float:
        """The fitted slope per instance (GrandSLAM Eq. 2 ``b``), never negative."""
        return self._coef[1]

    def observe(
        self, now: float, batch_size: int, compute_ms: float, round_trip_ms: float, *, cold: bool
    ) -> None:
        """Learn from one finished batch; a ``cold`` one is only counted."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        _check_finite("compute_ms", compute_ms)
        _check_finite("round_trip_ms", round_trip_ms)
        if cold:
            self.cold_samples += 1
            return
        self.warm_samples += 1
        self._round_trip.add(batch_size, round_trip_ms)
        self._compute.add(batch_size, compute_ms)
        self._coef = self._round_trip.coefficients()
        window = self._by_size.get(batch_size)
        if window is None:
            window = self._by_size[batch_size] = Window(self._window_s, self._max_samples)
        window.prune(now)
        window.add(now, round_trip_ms)
        if self.curve:
            self._curve = self._fit_curve(now)
        self._ratios.prune(now)
        self._ratios.add(now, round_trip_ms / self.estimate_ms(batch_size))

    @property
    def window_s(self) -> float:
        """How far back the windows of observed round trips reach."""
        return self._window_s

    def estimate_ms(self, n: int) -> float:
        """The round trip of a batch of ``n`` instances (at least floor_ms): the fitted line
        ``a + b·n`` (GrandSLAM Eq. 2), or with ``curve`` the measured curve where it is known.

        The curve is the observed median at every batch size with ``min_samples`` in the window,
        linearly interpolated between them and continued past them with the line's slope, then
        made monotone (a larger batch is never estimated faster than a smaller one). A function
        that batches super-linearly (face_embed on a CPU) is then priced at what its large
        batches cost, not at what a straight line through all sizes says. With a
        ``prior_curve`` (the profile's medians), the sizes not measured yet take the profile's
        value scaled by how the measured sizes compare with it (the median of measured over
        profiled): without it, a model that had only seen small batches continued them with the
        prior line's slope, priced the batch that carries the load as too slow to try, and
        never measured it while a backlog grew."""
        curve = self._curve
        if curve is not None:
            if n <= curve.top:
                return curve.at(n)
            return max(self._floor_ms, curve.ys[-1] + self._coef[1] * (n - curve.top))
        a, b = self._coef
        return max(self._floor_ms, a + b * n)

    def _fit_curve(self, now: float) -> Curve | None:
        known = sorted(
            (n, w.quantile(0.5))
            for n, w in self._by_size.items()
            if w.prune(now) >= self._min_samples
        )
        prior = self._prior_curve
        if prior:
            measured = dict(known)
            ratios = sorted(v / at for n, v in known if (at := interpolate(prior, n)) is not None)
            scale = ratios[len(ratios) // 2] if ratios else 1.0
            for n, value in prior:
                measured.setdefault(n, value * scale)
            known = sorted(measured.items())
        if not known:
            return None
        return Curve.through(known, slope=self._coef[1], floor=self._floor_ms)

    def largest_measured_batch(self) -> int:
        """The largest batch size the curve knows, measured or profiled (0 without a curve)."""
        return 0 if self._curve is None else self._curve.top

    def compute_estimate_ms(self, n: int) -> float:
        """The fitted compute time the function reports for ``n`` instances (at least floor_ms)."""
        a, b = self._compute.coefficients()
        return max(self._floor_ms, a + b * n)

    def spread(self, now: float) -> float:
        """P95 of observed/fitted over the window's warm samples, or the prior's; at least 1."""
        if self._ratios.prune(now) < self._min_samples:
            return self._prior_spread
        return max(1.0, self._ratios.p95())

    def samples_at(self, n: int, now: float) -> int:
        """How many warm samples of batch size ``n`` are in the window at ``now``."""
        window = self._by_size.get(n)
        return 0 if window is None else window.prune(now)

    def p95_ms(self, n: int, now: float) -> float:
        """P95 round trip of a batch of ``n``: observed (MLProxy) or ``estimate × spread``."""
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n!r}")
        window = self._by_size.get(n)
        if window is not None and window.prune(now) >= self._min_samples:
            return max(self._floor_ms, window.p95())  # floored like the estimates
        return self.estimate_ms(n) * self.spread(now)

    def p99_ms(self, n: int, now: float) -> float:
        """P99 round trip of a batch of ``n``: observed, or ``estimate ×`` the 99th percentile of
        observed over fitted (what a door that promises 99 % judges a batch's head by); never
        more than a larger batch's observed P99 (:meth:`_tail_cap`)."""
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n!r}")
        window = self._by_size.get(n)
        q = self.tail_quantile
        if window is not None and window.prune(now) >= self._min_samples:
            value = max(self._floor_ms, window.quantile(q))
        elif self._ratios.prune(now) < self._min_samples:
            value = self.estimate_ms(n) * self._prior_spread
        else:
            value = self.estimate_ms(n) * max(1.0, self._ratios.quantile(q))
        return min(value, self._tail_cap(n, now))

    def _tail_cap(self, n: int, now: float) -> float:
        """The least observed P99 among the sizes of ``n`` and above with ``min_samples`` in the
        window (inf where none). A batch is not slower at its tail than a larger one measured in
        the same window. A size's tail read from a few samples, or from the ratios of every size,
        can say otherwise: live, a few small batches that ran beside another at 2-3 times the
        alone line lifted the P99 of batches of one and two over that of the batches of 13
        that carried the load (on a core shared with another replica, embed at 3x its capacity),
        heads with 85 ms left could only go alone, and the queue behind them went one request
        at a time at a fifth of the pace admitted (docs/reliability.md, "Why the admitted were
        late, read from the records"). Read again after each sample and every
        :data:`CAP_REFRESH_S` (the door asks for every request)."""
        at, samples = self._caps_at
        if samples != self.warm_samples or not at <= now < at + CAP_REFRESH_S:
            q, caps, least = self.tail_quantile, [], math.inf
            for size in sorted(self._by_size, reverse=True):
                window = self._by_size[size]
                if window.prune(now) >= self._min_samples:
                    least = min(least, max(self._floor_ms, window.quantile(q)))
                    caps.append((size, least))
            caps.reverse()  # ascending sizes, each with the least tail at it and above
            self._caps, self._caps_at = caps, (now, self.warm_samples)
        for size, least in self._caps:
            if size >= n:
                return least
        return math.inf

    def mean_ms(self, n: int, now: float) -> float:
        """The mean round trip of a batch of ``n``: observed where the window holds enough of
        them, else the estimate. What a function's throughput is made of (a median prices a
        mix of small and large inputs at its small ones; a P95 at its large ones)."""
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n!r}")
        window = self._by_size.get(n)
        if window is not None and window.prune(now) >= self._min_samples:
            return max(self._floor_ms, window.mean())
        return self.estimate_ms(n)

    def observed_ms(
        self, n: int, now: float, recent_s: float | None = None
    ) -> tuple[float, float] | None:
        """The observed median and P95 round trip of batches of ``n`` in the window at ``now``,
        or ``None`` with fewer than ``min_samples`` of them (what the replay model is fed).

        ``recent_s``: the batches sent and answered within the last seconds only, when they
        hold at least two of ``n`` (what the service time is *now*, when measured outcomes say the
        window's no longer holds:
        :class:`slackwise_policies.evidence.Evidence`); else the whole window, as without it."""
        window = self._by_size.get(n)
        if window is None:
            return None
        if recent_s is not None:
            last = window.recent(now, recent_s)
            if len(last) >= 2:
                return nearest_rank(last, 0.5), nearest_rank(last, 0.95)
        if window.prune(now) < self._min_samples:
            return None
        return window.quantile(0.5), window.p95()

    def drift(self, now: float, recent_s: float) -> float | None:
        """How many times slower the batches sent and answered in the last ``recent_s`` were
        than the window's median at their sizes (the median over those batches), or ``None``
        with fewer than three of them at sizes the window knows: a step in service time (a
        neighbour, a slower node, bigger inputs) shows here seconds before requests miss."""
        ratios: list[float] = []
        for window in self._by_size.values():
            if window.prune(now) < self._min_samples:
                continue
            last = window.recent(now, recent_s)
            if last:
                typical = window.quantile(0.5)
                ratios.extend(value / typical for value in last)
        if len(ratios) < 3:
            return None
        return nearest_rank(sorted(ratios), 0.5)


class LatencyModels:
    """One :class:`LatencyModel` per input-size class (GrandSLAM §3.2: a model per input size).

    Models are made on first use by ``factory(size_class)``.
    """

    def __init__(self, factory: Callable[[str], LatencyModel]) -> None:
        self._factory = factory
        self._models: dict[str, LatencyModel] = {}

    def __getitem__(self, size_class: str) -> LatencyModel:
        model = self._models.get(size_class)
        if model is None:
            model = self._models[size_class] = self._factory(size_class)
        return model

    def __contains__(self, size_class: object) -> bool:
        return size_class in self._models

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)
