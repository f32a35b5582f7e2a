"""The advisor's percentile models against the simulator, over a grid of loads.

For each function, replica count and utilisation, a fixed fleet serves Poisson arrivals in the
simulator (the adapter's own batching, work-conserving: ``max_wait_ms: 0``, the true log-normal
service curve of the function's CPU profile) and the measured P95 and P99 response times are
set against two models:

* ``replay`` (:mod:`slackwise_policies.replay`, the advisor's default), fed what the controller
  observed in that run: each batch size's median and P95 round trip from the function's latency
  model at the end of the run, and its fitted estimate where a size has too few samples;
* ``batched`` (:func:`slackwise_policies.percentile.response_time_percentile`), with the service
  model the clairvoyant scalers used before (:func:`simulator.comparison.clairvoyant_service`:
  the profile's linear fit and its largest P95/mean spread).

Also printed: the fewest replicas each says meets the SLO at a rate, against the smallest
simulated count whose P99 is within it, which is what the autoscalers act on.

    .venv/bin/python benchmarks/percentile_check.py [--requests N] [--functions a,b]

The SLO of each run is ``slo_factor`` × the batch-1 median (Swayam's 5c̄); ``--slo-ms`` sets
one instead. Under a deadline-aware policy (GS) the batch size also answers the deadline; with
``--policy FIFO-NB`` batching is off. Rates are utilisation × the fleet's full-batch capacity.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from simulator.comparison import clairvoyant_service
from simulator.config import parse_sim_config
from simulator.engine import Simulation
from simulator.profiles import resolve_curves
from slackwise_policies.percentile import min_replicas, queue_state, response_time_percentile
from slackwise_policies.replay import ObservedService, replay_min_replicas, replay_percentile
from slackwise_policies.slack import stage_policy

REPLICAS = (1, 2, 4, 8)
UTILISATIONS = (0.1, 0.3, 0.5, 0.7, 0.85)
#: a simulated P99 above this is a queue that grew all run (the true curve's capacity is below
#: the fit's): printed, left out of the error summary
OVERLOADED_MS = 2000.0


def _config(fn: str, replicas: int, slo_ms: float, requests: int, policy: str) -> Any:
    return parse_sim_config(
        {
            "seed": 11,
            "requests": requests,
            "warmup_fraction": 0.1,
            "policies": [policy],
            "adapter": {"max_wait_ms": 0},
            "functions": {fn: {"nodes": replicas, "max_batch": 64}},
            "apps": {"app": {"stages": [fn], "slo_ms": slo_ms}},
        },
        "percentile-check",
        Path.cwd(),
    )


def _observed(sim: Simulation, limit: int) -> ObservedService:
    """What the run's controller observed for its one function, as the advisor reads it."""
    station = sim.apps[0].stations[0]
    return ObservedService.from_latency_model(
        station.model, sim.now, batch_limit=limit, container_concurrency=station.concurrency
    )


def _simulated_p99(name: str, n: int, rate: float, slo: float, args: Any, curve: Any) -> float:
    config = _config(name, n, slo, args.requests, args.policy)
    sim = Simulation(config, stage_policy(args.policy), {name: curve}, rate_rps=rate)
    sim.run()
    lat, _ = sim.latencies_by_arrival()
    return float(np.percentile(lat, 99))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", default="embed,imagenet")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--slo-factor", type=float, default=5.0)
    parser.add_argument("--slo-ms", type=float)
    parser.add_argument("--policy", default="GS")
    args = parser.parse_args()
    names = [f for f in args.functions.split(",") if f]
    curves = resolve_curves("cpu", {n: n for n in names}, Path.cwd())
    policy = stage_policy(args.policy)
    errors: dict[str, list[float]] = {}
    print("| function | replicas | util | rate rps | sim P95 | replay | err % | batched | err % | "
          "sim P99 | replay | err % | batched | err % | batch sim / batched |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        curve = curves[name]
        slo = args.slo_ms or args.slo_factor * curve.median_ms(1)
        limit = policy.batch_limit(64)
        service = clairvoyant_service(curve, batch_limit=limit, slots=1)
        per_replica = 64 * 1000.0 / service.mean_ms(64)
        observed: ObservedService | None = None
        for replicas in REPLICAS:
            for util in UTILISATIONS:
                rate = util * replicas * per_replica
                config = _config(name, replicas, slo, args.requests, args.policy)
                sim = Simulation(config, policy, {name: curve}, rate_rps=rate)
                result = sim.run()
                lat, _ = sim.latencies_by_arrival()
                p95, p99 = (float(v) for v in np.percentile(lat, [95, 99]))
                seen = _observed(sim, limit)
                if util == 0.5 and replicas == 2:
                    observed = seen  # the sizing table below is fed one mid-load observation
                state = queue_state(rate, replicas, service)
                row = [f"| {name} | {replicas} | {util:.2f} | {rate:.0f}"]
                stable = p99 < OVERLOADED_MS  # a backlog that never drains is no percentile
                for q, measured in ((95.0, p95), (99.0, p99)):
                    cells = [f"{measured:.1f}"]
                    for model_name, value in (
                        ("replay", replay_percentile(rate, replicas, seen, slo, q)),
                        ("batched", response_time_percentile(rate, replicas, service, q)),
                    ):
                        err = 100.0 * (value - measured) / measured
                        if stable:
                            errors.setdefault(f"{model_name} p{q:.0f}", []).append(err)
                        cells.append(f"{value:.1f} | {err:+.0f}")
                    row.append(" | ".join(cells))
                row.append(f"{result.mean_batch:.1f} / {state.batch_size:.1f} |")
                print(" | ".join(row), flush=True)
        assert observed is not None
        print(f"\n{name}: SLO {slo:.1f} ms at P99; fewest replicas meeting it "
              "(replay fed the observations of the 2-replica, 0.5 run)")  # fmt: skip
        print("| rate rps | replay | batched | simulated |\n|---|---|---|---|")
        for rate in (0.5 * per_replica, 2 * per_replica, 5 * per_replica, 10 * per_replica):
            replay_n = replay_min_replicas(rate, slo, 99.0, observed, max_replicas=64)
            model_n = min_replicas(rate, slo, 99.0, service, max_replicas=64)
            n = max(1, min(replay_n, model_n) - 2)
            while n < 64 and _simulated_p99(name, n, rate, slo, args, curve) > slo:
                n += 1
            print(f"| {rate:.0f} | {replay_n} | {model_n} | {n} |", flush=True)
        print()
    for key, values in errors.items():
        arr = np.abs(np.asarray(values))
        within = int(np.count_nonzero(arr <= 10.0))
        print(f"{key} over {len(arr)} stable points: mean |error| {arr.mean():.1f} %, "
              f"median {np.median(arr):.1f} %, within 10 %: {within} of {len(arr)}, "
              f"max {arr.max():.1f} %, signed mean {np.mean(values):+.1f} % "
              f"(positive: the model over-estimates)")  # fmt: skip


if __name__ == "__main__":
    main()
