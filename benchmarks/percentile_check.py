"""The percentile model (adapter/policies/percentile.py) against the simulator, over a grid of
loads.

For each function, replica count and utilisation, a fixed fleet serves Poisson arrivals in the
simulator (the adapter's own batching, work-conserving: ``max_wait_ms: 0``, the true log-normal
service curve of the function's CPU profile) and the measured P95 and P99 response times are
set against :func:`adapter.policies.percentile.response_time_percentile` with the service model the
clairvoyant scalers use (:func:`simulator.comparison.clairvoyant_service`: the profile's linear
fit and its largest P95/mean spread). Also printed: the fewest replicas each side says meets
the SLO at that rate (the model's :func:`~adapter.policies.percentile.min_replicas` against the
smallest
simulated count whose P99 is within it), which is what the autoscalers act on.

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

from adapter.policies.percentile import min_replicas, queue_state, response_time_percentile
from adapter.policies.slack import stage_policy
from simulator.comparison import clairvoyant_service
from simulator.config import parse_sim_config
from simulator.engine import Simulation
from simulator.profiles import resolve_curves

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", default="embed,imagenet")
    parser.add_argument("--requests", type=int, default=40000)
    parser.add_argument("--slo-factor", type=float, default=5.0)
    parser.add_argument("--slo-ms", type=float)
    parser.add_argument("--policy", default="GS")
    args = parser.parse_args()
    names = [f for f in args.functions.split(",") if f]
    curves = resolve_curves("cpu", {n: n for n in names}, Path.cwd())
    policy = stage_policy(args.policy)
    errors: dict[str, list[float]] = {"p95": [], "p99": []}
    print("| function | replicas | util | rate rps | sim P95 | model P95 | err % | sim P99 | "
          "model P99 | err % | mean batch sim/model |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        curve = curves[name]
        slo = args.slo_ms or args.slo_factor * curve.median_ms(1)
        service = clairvoyant_service(curve, batch_limit=policy.batch_limit(64), slots=1)
        per_replica = 64 * 1000.0 / service.mean_ms(64)
        for replicas in REPLICAS:
            for util in UTILISATIONS:
                rate = util * replicas * per_replica
                config = _config(name, replicas, slo, args.requests, args.policy)
                sim = Simulation(config, policy, {name: curve}, rate_rps=rate)
                result = sim.run()
                lat, _ = sim.latencies_by_arrival()
                p95, p99 = (float(v) for v in np.percentile(lat, [95, 99]))
                state = queue_state(rate, replicas, service)
                row = [f"| {name} | {replicas} | {util:.2f} | {rate:.0f}"]
                for q, measured in ((95.0, p95), (99.0, p99)):
                    model = response_time_percentile(rate, replicas, service, q)
                    err = 100.0 * (model - measured) / measured
                    if p99 < OVERLOADED_MS:  # a backlog that never drains is no percentile
                        errors[f"p{q:.0f}"].append(err)
                    row.append(f"{measured:.1f} | {model:.1f} | {err:+.0f}")
                row.append(f"{result.mean_batch:.1f} / {state.batch_size:.1f} |")
                print(" | ".join(row))
        print(f"\n{name}: SLO {slo:.1f} ms at P99; fewest replicas meeting it")
        print("| rate rps | model | simulated |\n|---|---|---|")
        for rate in (0.5 * per_replica, 2 * per_replica, 5 * per_replica, 10 * per_replica):
            model_n = min_replicas(rate, slo, 99.0, service, max_replicas=64)
            n = max(1, model_n - 2)
            while n < 64:
                config = _config(name, n, slo, args.requests, args.policy)
                sim = Simulation(config, policy, {name: curve}, rate_rps=rate)
                sim.run()
                lat, _ = sim.latencies_by_arrival()
                if float(np.percentile(lat, 99)) <= slo:
                    break
                n += 1
            print(f"| {rate:.0f} | {model_n} | {n} |")
        print()
    for key, values in errors.items():
        arr = np.abs(np.asarray(values))
        print(f"{key} over {len(arr)} stable points: mean |error| {arr.mean():.1f} %, "
              f"median {np.median(arr):.1f} %, "
              f"max {arr.max():.1f} %, signed mean {np.mean(values):+.1f} % "
              f"(positive: the model over-estimates)")  # fmt: skip


if __name__ == "__main__":
    main()
