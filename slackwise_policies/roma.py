"""ROMA (seed 003): which model a free GPU serves, and how many CPU cores each model gets.

Three pure pieces, each taking what it needs as arguments (times in seconds):

* :func:`gpu_choice` (Algorithm 1): when a GPU frees, every model with a queue is scored by a
  weighted average ``w = β·E + (1 − β)·R`` of the estimated response times of its queued requests
  (``E``: the wait so far plus ``n`` GPU service times for the ``n``-th in line) and the measured
  response times of its recent completions (``R``), against its set point ``α·SLA``; the deficit
  ``ε = max(0, (w − set point) / set point)`` ranks them and the most deficient is served (ties:
  the longest queue, then the first). The paper's line 19 reads ``E + (1 − α)·R``; its text says
  β weighs the two, which is what is done here. :func:`gpu_batch` is beyond the paper: how many of
  that model's queue to serve at once, the most whose batch still lets the head meet its SLA.
* :class:`CoreController` (the CT controller, Eqs. 11–12): a PI controller ``u_k = u_{k−1} +
  K·(e_k − a·e_{k−1})`` on the relative error ``e = (τ_R − set point) / set point``, its state
  updated with the allocation actually granted (anti-windup: what the supervisor cut or the
  bounds clipped is not integrated). :func:`pi_gains` gives ``K`` and ``a`` from the model's
  gain ``k``, its pole ``b`` and the closed-loop pole ``q`` (Eq. 12); the paper tuned by hand
  (``K = 0.15``, ``a = 0.11``).
* :func:`supervise` (Algorithm 2): with ``η = available / Σ demands``, demands are scaled by ``η``
  when the node is contended (``η < 1``) and raised by ``γ·(η − 1)`` of themselves when it is not
  (``γ = 0``: granted as asked; ``γ = 1``: every available core used).

:class:`RuleController` is the paper's RR+rules baseline: one core more when the response time
reaches 0.8 × SLA, one less at 0.2 × SLA, every 15 s. :func:`load_floor` is beyond the paper: a
feed-forward floor under the CT controller's demand from the arrival rate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "CoreController",
    "GpuCandidate",
    "NodeCores",
    "RuleController",
    "gpu_batch",
    "gpu_choice",
    "load_floor",
    "pi_gains",
    "response_signal",
    "round_robin",
    "supervise",
]


def pi_gains(k: float, b: float, q: float) -> tuple[float, float]:
    """``(K, a)`` of Eq. 12: the PI controller placing both closed-loop poles at ``q``."""
    if not (0.0 <= q < 1.0 and 0.0 <= b < 1.0) or k <= 0:
        raise ValueError(f"need k > 0 and b, q in [0, 1), got k={k!r}, b={b!r}, q={q!r}")
    denominator = q - 2.0 * b + 1.0
    if denominator == 0:
        raise ValueError(f"q - 2b + 1 = 0 for b={b!r}, q={q!r}")
    a = ((2.0 - b) * q - b) / denominator
    if a == b:
        raise ValueError(f"a = b = {a!r}: Eq. 12 has no finite K there")
    return 4.0 * (a - 1.0) * (b - 1.0) / (k * (b - a) ** 2), a


@dataclass
class CoreController:
    """One model executable's CT controller: cores from response times, every period."""

    gain: float
    zero: float
    u_min: float
    u_max: float
    u: float
    _error: float = 0.0

    def next_allocation(
        self, response_s: float | None, set_point_s: float, *, floor: float = 0.0
    ) -> float:
        """The demand for the next period; ``response_s`` None (nothing completed) keeps the
        error of the last period. ``floor`` (beyond the paper, see :func:`load_floor`) is the
        least the demand may be: the cores the arrivals alone call for."""
        if set_point_s <= 0:
            raise ValueError(f"set point must be > 0, got {set_point_s!r}")
        error = self._error if response_s is None else (response_s - set_point_s) / set_point_s
        demand = max(floor, self.u + self.gain * (error - self.zero * self._error))
        self._error = error
        return min(self.u_max, max(self.u_min, demand))

    def granted(self, u: float) -> None:
        """What the supervisor actuated: the state the next step integrates from."""
        self.u = min(self.u_max, max(self.u_min, u))


def load_floor(rate_rps: float, work_s: float, utilization: float) -> float:
    """Feed-forward (beyond the paper): the cores that keep ``utilization`` at ``rate_rps``
    requests a second of ``work_s`` core-seconds each. A PI loop on response times answers a
    step in load only after the queue it causes has raised the mean for a period or more; the
    arrival rate shows the step in the period it happens, so the controller's demand starts
    from at least this (:meth:`CoreController.next_allocation`'s ``floor``)."""
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must be within (0, 1], got {utilization!r}")
    if rate_rps < 0 or work_s < 0:
        raise ValueError(f"rate and work must be >= 0, got {rate_rps!r}, {work_s!r}")
    return rate_rps * work_s / utilization


@dataclass
class RuleController:
    """RR+rules: ±1 core on the response time against the SLA, every ``period_s``."""

    u_min: float
    u_max: float
    u: float
    period_s: float = 15.0
    up: float = 0.8
    down: float = 0.2
    _next_s: float = 0.0

    def next_allocation(self, now: float, response_s: float | None, sla_s: float) -> float:
        if now < self._next_s or response_s is None:
            return self.u
        self._next_s = now + self.period_s
        if response_s >= self.up * sla_s:
            self.u = min(self.u_max, self.u + 1.0)
        elif response_s <= self.down * sla_s:
            self.u = max(self.u_min, self.u - 1.0)
        return self.u


def response_signal(completed_s: Sequence[float], oldest_waiting_s: float | None) -> float | None:
    """What a CT controller reads for a period: the mean response time of the requests
    completed in it, or the age of the oldest request still waiting when that is larger (a
    starved executable completes nothing, and its controller must still see it); None when
    neither exists."""
    mean = sum(completed_s) / len(completed_s) if completed_s else None
    if oldest_waiting_s is not None and (mean is None or oldest_waiting_s > mean):
        return oldest_waiting_s
    return mean


@dataclass
class NodeCores:
    """One node's CPU executables under Algorithm 2: each period every executable's CT
    controller asks (:meth:`CoreController.next_allocation`), :func:`supervise` scales the asks
    to the node's cores (less ``gpu_cores``, kept for the GPU executables), and each controller
    integrates what it was granted."""

    controllers: Sequence[CoreController]
    cores: float
    gpu_cores: float = 0.0
    gamma: float = 0.0

    def step(
        self,
        responses: Sequence[float | None],
        set_points_s: Sequence[float],
        floors: Sequence[float] | None = None,
    ) -> list[float]:
        """The cores each executable gets for the next period."""
        floors = [0.0] * len(self.controllers) if floors is None else floors
        asks = zip(self.controllers, responses, set_points_s, floors, strict=True)
        demands = [ct.next_allocation(r, sp, floor=f) for ct, r, sp, f in asks]
        granted = supervise(demands, self.cores, gpu_cores=self.gpu_cores, gamma=self.gamma)
        for ct, u in zip(self.controllers, granted, strict=True):
            ct.granted(u)
        return granted


def supervise(
    demands: Sequence[float], cores: float, *, gpu_cores: float = 0.0, gamma: float = 0.0
) -> list[float]:
    """Algorithm 2: the allocations a node grants for ``demands`` (see the module docstring)."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be within [0, 1], got {gamma!r}")
    available = cores - gpu_cores
    total = sum(demands)
    if total <= 0 or available <= 0:
        return [0.0 for _ in demands]
    eta = available / total
    if eta < 1.0:
        return [u * eta for u in demands]
    return [u + gamma * (eta - 1.0) * u for u in demands]


@dataclass(frozen=True)
class GpuCandidate:
    """One model's side of a GPU decision."""

    #: arrival times of its queued requests, oldest first
    queued: Sequence[float]
    #: mean response time of its recent completions (None: none yet)
    recent_s: float | None
    sla_s: float
    #: the GPU's time for a batch of n of this model, seconds
    gpu_s: Callable[[int], float]


def gpu_choice(
    candidates: Sequence[GpuCandidate], now: float, *, alpha: float, beta: float
) -> int | None:
    """Algorithm 1: the index of the model a free GPU serves next, or None (no queue)."""
    best: tuple[float, int, int] | None = None
    for i, c in enumerate(candidates):
        if not c.queued:
            continue
        one = c.gpu_s(1)
        estimated = sum(now - t + n * one for n, t in enumerate(c.queued)) / len(c.queued)
        measured = estimated if c.recent_s is None else c.recent_s
        weighted = beta * estimated + (1.0 - beta) * measured
        set_point = alpha * c.sla_s
        deficit = max(0.0, (weighted - set_point) / set_point)
        key = (deficit, len(c.queued), -i)
        if best is None or key > best:
            best = key
    return None if best is None else -best[2]


def round_robin(waiting: Sequence[bool], turn: int) -> int | None:
    """The round-robin baselines' GPU choice: the first index from ``turn`` on (wrapping) whose
    queue is ``waiting``, or None; the next turn starts after it."""
    count = len(waiting)
    return next((j for j in ((turn + k) % count for k in range(count)) if waiting[j]), None)


def gpu_batch(candidate: GpuCandidate, now: float, max_batch: int) -> int:
    """Beyond the paper: the most of the queue (oldest first, up to ``max_batch``) one GPU batch
    can take while its head still meets the SLA; at least one. A head that cannot meet it even
    alone leaves with as many as fit (late requests only get later by waiting one at a time)."""
    if not candidate.queued:
        return 0
    head_left = candidate.queued[0] + candidate.sla_s - now
    if candidate.gpu_s(1) > head_left:
        return min(max_batch, len(candidate.queued))
    best = 1
    for n in range(2, min(max_batch, len(candidate.queued)) + 1):
        if candidate.gpu_s(n) > head_left:
            break
        best = n
    return best
