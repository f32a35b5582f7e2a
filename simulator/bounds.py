"""The most any stage policy could serve on a fixed fleet: a ceiling to read the gains under.

Whatever the order, the slack split or the batch sizes, a function's nodes finish at most
``nodes × n / L(n)`` requests a second with batches of ``n`` (``L`` its median batch latency),
and no batch that a request is to ride within its SLO can take longer than the SLO less what
the request's other stages take at the least (each of them alone, batch 1). So each function's
ceiling is ``nodes × max n / L(n)`` over the batch sizes within the function's ``max_batch`` whose
``L(n)`` fits that room for every app it serves, and the workload's rate is bounded by the first
function to reach its ceiling (app requests split by weight; a function serving two apps serves
both shares; with input sizes, a function's instances cost their mean, :mod:`simulator.inputs`).
Queueing, a batch's wait for its last member and the variance of service times are ignored
(:mod:`simulator.tail_bound` adds the last two), so the bound is generous: no policy
sustains more with every request in its SLO, and a baseline already close to it leaves no
policy room to gain. (The SLA search runs a finite number of requests and lets 1 % miss, and a
late request may ride a batch larger than any SLO allows, so a search can pass a rate a few
percent above the ceiling, as a backlog that has not yet grown far does.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from simulator.config import SimConfig
from simulator.inputs import InputSizes
from simulator.run_setup import app_slos_ms
from simulator.service import ServiceCurve
from slackwise_policies.throughput_split import AppPath, StageFleet, highest_rate

__all__ = ["Ceiling", "throughput_ceiling", "waited_ceiling"]


@dataclass(frozen=True, slots=True)
class Ceiling:
    """The workload's ceiling in app requests per second, the function that sets it, and each
    function's own: (requests a second it can finish, the batch size that does it)."""

    rate_rps: float
    binding: str
    functions: Mapping[str, tuple[float, int]]


def throughput_ceiling(config: SimConfig, curves: Mapping[str, ServiceCurve]) -> Ceiling:
    slos = app_slos_ms(config, curves)
    costs = InputSizes(config, config.seed).mean_cost
    total_weight = sum(app.weight for app in config.apps.values())
    per_function: dict[str, tuple[float, int]] = {}
    share: dict[str, float] = {}  # the share of app requests that visit each function
    for name, fn in config.functions.items():
        rooms = []
        for app_name, app in config.apps.items():
            if name not in app.stages:
                continue
            share[name] = share.get(name, 0.0) + app.weight / total_weight * app.stages.count(name)
            others = sum(curves[s].median_ms(1) for s in app.stages) - curves[name].median_ms(1)
            rooms.append(slos[app_name] - others)
        if not rooms:
            continue
        room = min(rooms)
        curve = curves[name]
        best, best_n = 0.0, 0
        for n in range(1, fn.max_batch + 1):
            latency = curve.median_ms(n)
            if latency > room:
                continue
            rate = fn.nodes * n * 1000.0 / (latency * costs[name])
            if rate > best:
                best, best_n = rate, n
        per_function[name] = (best, best_n)
    bounds = {n: per_function[n][0] / share[n] for n in per_function}
    binding = min(bounds, key=bounds.__getitem__)
    return Ceiling(rate_rps=bounds[binding], binding=binding, functions=per_function)


def waited_ceiling(config: SimConfig, curves: Mapping[str, ServiceCurve]) -> float:
    """The ceiling's question asked of every app's path at once, with each stage's wait for a
    slot: the highest rate (app requests a second, in the apps' weights) at which, for every
    app, the sum over its stages of ``L(n) · (1 + 1 / slots)`` fits its SLO, ``n`` the least
    batch with which the function's slots carry its share (GS-T's least budgets,
    :func:`slackwise_policies.throughput_split.highest_rate`, with no room left for bursts). A
    request that reaches a function whose every slot is busy waits for the first to free, up
    to a batch's time over the slots when they are staggered evenly; at the ceiling every slot
    is busy. A model, not a bound: it is what a policy whose batches wait for a free slot can
    carry with every request on time."""
    slos = app_slos_ms(config, curves)
    costs = InputSizes(config, config.seed).mean_cost
    fleets = {
        name: StageFleet(
            _scaled(curves[name], costs[name]),
            fn.nodes * max(1, fn.container_concurrency),
            fn.max_batch,
        )
        for name, fn in config.functions.items()
    }
    apps = {name: AppPath(tuple(app.stages), slos[name]) for name, app in config.apps.items()}
    total = sum(app.weight for app in config.apps.values())
    mix = {name: app.weight / total for name, app in config.apps.items()}
    return highest_rate(fleets, apps, mix, utilisation=1.0, wait=1.0)


def _scaled(curve: ServiceCurve, cost: float) -> Callable[[int], float]:
    """A batch's median latency (ms) with its instances at ``cost`` each."""
    return lambda n: curve.median_ms(n) * cost
