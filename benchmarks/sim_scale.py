"""How fast the simulator runs at the issue's scale: 1000 nodes, 10 million requests.

Runs one stage policy (GS by default) over ``experiments/sim/scale-1000.yaml`` (WL1 on the CPU
profiles, 1000 fixed nodes, 6000 rps) in this process and prints the engine's requests per
second of wall time, events per second and the run's own results. ``--requests`` runs fewer
(the rate stays; the virtual duration shrinks). ``--profile`` writes a cProfile of the run.

    .venv/bin/python benchmarks/sim_scale.py --requests 1000000 --json docs/results/sim-scale.json

``--json`` writes the numbers with the commit, the machine and the command.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

from simulator.config import load_sim_config
from simulator.engine import Simulation
from simulator.runner import curves_for
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine
from slackwise_policies.slack import stage_policy

CONFIG = Path(__file__).resolve().parents[1] / "experiments" / "sim" / "scale-1000.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", default=str(CONFIG))
    parser.add_argument("--requests", type=int, help="default: the config's (10 million)")
    parser.add_argument("--policy", default="GS")
    parser.add_argument("--profile", metavar="OUT.prof", help="write a cProfile here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    config = load_sim_config(args.config)
    curves = curves_for(config)
    nodes = sum(f.nodes for f in config.functions.values())
    sim = Simulation(config, stage_policy(args.policy), curves, requests=args.requests)
    profiler = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = sim.run()
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - started
    print(
        f"{config.workload}: {nodes} nodes, {sim.requests} requests at {sim.rate_rps:g} rps, "
        f"policy {args.policy}"
    )
    print(
        f"  wall {wall:.1f} s: {sim.requests / wall:,.0f} requests/s, "
        f"{result.events / wall:,.0f} events/s ({result.events:,} events, "
        f"{result.duration_s:.0f} s simulated)"
    )
    print(
        f"  violations {result.violation_pct:.3f} %, p50 {result.p50_ms:.1f} ms, "
        f"p99 {result.p99_ms:.1f} ms, mean batch {result.mean_batch:.2f}, "
        f"replica-seconds {result.replica_seconds:,.0f}"
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "requests": sim.requests,
            "nodes": nodes,
            "rate_rps": sim.rate_rps,
            "policy": args.policy,
            "wall_s": round(wall, 2),
            "requests_per_s": round(sim.requests / wall),
            "events": result.events,
            "events_per_s": round(result.events / wall),
            "simulated_s": round(result.duration_s, 1),
            "violation_pct": round(result.violation_pct, 3),
            "mean_batch": round(result.mean_batch, 3),
            "meta": {
                "command": " ".join(["python", "benchmarks/sim_scale.py", *(argv or sys.argv[1:])]),
                "commit": commit(Path(__file__).resolve().parents[1]),
                "date": time.strftime("%Y-%m-%d"),
                "machine": machine(),
            },
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if profiler is not None:
        profiler.dump_stats(args.profile)
        pstats.Stats(args.profile, stream=sys.stdout).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
