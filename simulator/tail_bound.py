"""The ceiling with what every batching policy pays: a batch's fill and its service time's spread.

:func:`simulator.bounds.throughput_ceiling` lets a batch of ``n`` start the moment its requests
arrive and take its median time. Two things no stage policy can avoid are left out, and where a
function binds with a tight room they decide what can be served:

* **A batch starts only once its last member has arrived.** Requests reach a function as a
  Poisson stream (thinned from the apps' arrivals) at rate ``λ``. In a batch of ``n`` formed from
  consecutive arrivals (any other grouping only stretches the spans), the member with ``m``
  members after it waits for the ``m``-th next arrival, a Gamma(``m``, ``λ``) time, before the
  batch can start. Summed over the members, the count late by ``t`` of spare time is
  ``E[(n - 1 - N)^+]`` with ``N`` Poisson of mean ``λ·t``.
* **The batch's time is drawn, not its median.** The simulated service draws a batch of ``n``
  from a log-normal with the profile's median and P95 (:mod:`simulator.service`), whose mean is
  what sets a slot's pace (``median · exp(σ²/2)``) and whose upper tail makes some batches late
  that the median fits.

A function's rate is then the highest ``λ`` at which some mix of batch sizes carries ``λ`` on its
slots (each request's share of a slot's time, ``E(n) / n``, averaged over the mix, at most
``slots / λ``) while the share of its requests late is within what the SLA lets the requests that
visit it miss (all of the SLA's allowance spent there: ``max_violation_pct`` of all requests, over
the share of requests that visit the function). Both constraints are linear in the share of
requests ridden in each size, so a mix of at most two sizes decides it. A request's room is its
app's SLO less its other stages' batch-1 medians, as the ceiling takes it, and a function serving
two apps gives every request the roomier one's: each choice is the generous one, so no policy
sustains more than this rate with every app within its SLA. Slots free for the next batch at
once (no queueing for a slot) and the rate is found on a grid of 0.2 % steps.

Where the room is loose it is the ceiling less the mean's excess over the median, or a little
above the ceiling where the SLA's allowance buys batches larger than the room fits (the ceiling
lets no request be late); where the room is tight (a function that binds with a room a few of
its batches long) it can be well under it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from simulator.bounds import Ceiling
from simulator.config import SimConfig
from simulator.inputs import InputSizes
from simulator.run_setup import app_slos_ms
from simulator.service import ServiceCurve

__all__ = ["TailStage", "late_shares", "stage_rate", "tail_ceiling"]

#: the rate grid's step (relative) and the service-time quantiles each batch's lateness averages
STEP = 0.002
QUANTILES = 200


@dataclass(frozen=True, slots=True)
class TailStage:
    """One function as the bound sees it: per batch size ``1..max_batch`` (index 0 unused) the
    median latency (ms) and the log-normal's σ, its slots, the room (ms) its requests have and
    the share of them that may be late."""

    medians_ms: tuple[float, ...]
    sigmas: tuple[float, ...]
    slots: int
    room_ms: float
    allowance: float

    @classmethod
    def of(
        cls, curve: ServiceCurve, cost: float, max_batch: int, slots: int, room_ms: float,
        allowance: float,
    ) -> TailStage:  # fmt: skip
        medians, sigmas = curve.tables(max_batch, deterministic=False)
        return cls(tuple(m * cost for m in medians), tuple(sigmas), slots, room_ms, allowance)


def late_shares(stage: TailStage, rate: float) -> np.ndarray:
    """Per batch size ``n`` (index ``n - 1``): the expected share of a batch's members that are
    late at ``rate`` requests a second into the function (the batch's fill, then its draw)."""
    sizes = len(stage.medians_ms) - 1
    z = np.array([NormalDist().inv_cdf((i + 0.5) / QUANTILES) for i in range(QUANTILES)])
    medians = np.array(stage.medians_ms[1:])
    sigmas = np.array(stage.sigmas[1:])
    draws = medians[:, None] * np.exp(sigmas[:, None] * z[None, :])  # (size, quantile) ms
    spare_s = (stage.room_ms - draws) / 1000.0
    mean = np.maximum(rate * spare_s, 0.0)  # Poisson means, per size and quantile
    # E[(n - 1 - N)^+] = (n - 1) P(N <= n - 2) - E[N; N <= n - 2]: the sums over j = 0 .. n - 2,
    # built up j by j over the sizes not yet read (row i is size i + 1, read at j = i - 1)
    pmf = np.exp(-mean)
    cdf, partial = pmf.copy(), np.zeros_like(pmf)
    short, short_mean = np.zeros_like(pmf), np.zeros_like(pmf)
    for j in range(sizes - 1):
        if j:
            rows = slice(j + 1, sizes)
            pmf[rows] *= mean[rows] / j
            cdf[rows] += pmf[rows]
            partial[rows] += j * pmf[rows]
        short[j + 1], short_mean[j + 1] = cdf[j + 1], partial[j + 1]
    n = np.arange(1, sizes + 1)[:, None].astype(float)
    waiting = np.where(n >= 2, (n - 1) * short - short_mean, 0.0)
    late = np.where(spare_s < 0.0, n, waiting)
    return np.asarray(late.mean(axis=1) / n[:, 0])


def _carries(stage: TailStage, rate: float, per_request_s: np.ndarray) -> bool:
    """Whether some mix of at most two batch sizes carries ``rate`` within the allowance."""
    budget = stage.slots / rate  # the most slot-seconds a request may take on average
    late = late_shares(stage, rate)
    fits = per_request_s <= budget
    if np.any(fits & (late <= stage.allowance)):
        return True
    if not fits.any():
        return False
    # a dear size a (over the budget) mixed with a cheap one b, in the shares that meet it
    dear, cheap = ~fits, fits
    ca, pa = per_request_s[dear][:, None], late[dear][:, None]
    cb, pb = per_request_s[cheap][None, :], late[cheap][None, :]
    mixed = pa + (pb - pa) * (ca - budget) / (ca - cb)
    return bool(np.any(mixed <= stage.allowance))


def stage_rate(stage: TailStage) -> float:
    """The highest rate (requests a second into the function) on the grid that it carries."""
    sizes = np.arange(1, len(stage.medians_ms))
    means = np.array(stage.medians_ms[1:]) * np.exp(np.array(stage.sigmas[1:]) ** 2 / 2.0)
    per_request_s = means / 1000.0 / sizes
    rate = float(stage.slots / per_request_s.min())  # the most any mix carries
    floor = rate * 1e-4
    while rate > floor:
        if _carries(stage, rate, per_request_s):
            return rate
        rate *= 1.0 - STEP
    return 0.0


def tail_ceiling(config: SimConfig, curves: Mapping[str, ServiceCurve]) -> Ceiling:
    """The workload's rate (app requests a second, in the apps' weights) bounded by the first
    function to reach its rate with fill and spread; ``functions`` holds each function's rate
    (requests a second into it) and, as the batch, 0 (a mix is not one size)."""
    slos = app_slos_ms(config, curves)
    costs = InputSizes(config, config.seed).mean_cost
    total = sum(app.weight for app in config.apps.values())
    per_function: dict[str, tuple[float, int]] = {}
    bounds: dict[str, float] = {}
    for name, fn in config.functions.items():
        apps = [app for app in config.apps.values() if name in app.stages]
        if not apps:
            continue
        rooms = [
            slos[app_name] - sum(curves[s].median_ms(1) for s in app.stages if s != name)
            - curves[name].median_ms(1) * (app.stages.count(name) - 1)
            for app_name, app in config.apps.items() if name in app.stages
        ]  # fmt: skip
        visiting = sum(app.weight for app in apps) / total
        visits = sum(app.weight * app.stages.count(name) for app in apps) / total
        stage = TailStage.of(
            curves[name], costs[name], fn.max_batch, fn.nodes * max(1, fn.container_concurrency),
            max(rooms), min(1.0, config.max_violation_pct / 100.0 / visiting),
        )  # fmt: skip
        rate = stage_rate(stage)
        per_function[name] = (rate, 0)
        bounds[name] = rate / visits
    binding = min(bounds, key=bounds.__getitem__)
    if not math.isfinite(bounds[binding]):
        raise ValueError(f"{binding}: no finite rate")
    return Ceiling(rate_rps=bounds[binding], binding=binding, functions=per_function)
