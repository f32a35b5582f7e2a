"""How often each policy holds the SLA at fixed rates, over seeds, at a run length you choose.

``slackwise simulate`` finds a policy's highest rate under the SLA by bisection, with runs of the
config's ``search.requests``. On a GPU fleet that is 40,000 requests at 20,000-30,000 a second:
1.3-1.8 s, so the rate a search finds turns on a fleet's first second (docs/simulator.md, "A
flood read from its first arrivals"). This runs each policy at each rate with each seed for
``--requests`` (the config's search length by default) and reports, per policy and rate, how
many seeds held the SLA and the range of the share missed.

    .venv/bin/python benchmarks/fixed_rate_grid.py -c experiments/sim/wl1-gpu.yaml \\
        --policies GS-T,ED-50,GS --rates 21800,22100,22400,22700 --seeds 1,2,3 \\
        --requests 200000 --jobs 2 --json docs/results/steady-wl1-gpu.json

``--json`` writes every run's share missed with the commit, the machine and the command; the
table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from simulator.config import load_sim_config
from simulator.runner import curves_for, run_one
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

ROOT = Path(__file__).resolve().parents[1]


def _run(job: tuple[str, str, float, int, int]) -> tuple[str, float, int, float]:
    config_path, policy, rate, seed, requests = job
    config = load_sim_config(Path(config_path))
    result = run_one(
        config, policy, curves_for(config), rate_rps=rate, requests=requests, seed=seed
    )
    return policy, rate, seed, result.violation_pct


def _numbers(text: str, kind: type, flag: str, parser: argparse.ArgumentParser) -> list:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"{flag} must be numbers separated by commas, got {text!r}")
    if not values:
        parser.error(f"{flag} needs at least one value")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", type=Path, required=True, help="simulator YAML")
    parser.add_argument("--policies", required=True, help="comma-separated policy names")
    parser.add_argument("--rates", required=True, help="comma-separated rates (req/s)")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    parser.add_argument("--requests", type=int, help="requests a run (the search's by default)")
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    parser.add_argument("--json", type=Path, help="write every run's share missed here")
    args = parser.parse_args(argv)
    rates = _numbers(args.rates, float, "--rates", parser)
    seeds = _numbers(args.seeds, int, "--seeds", parser)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies or args.jobs < 1 or (args.requests is not None and args.requests < 1):
        parser.error("--policies needs at least one name, --jobs and --requests >= 1")
    try:
        config = load_sim_config(args.config)
    except (OSError, ValueError) as exc:
        parser.error(f"--config {args.config}: {exc}")
    requests = args.requests or config.search.requests
    started_at = commit(ROOT)
    jobs = [(str(args.config), p, r, s, requests) for p in policies for r in rates for s in seeds]
    missed: dict[tuple[str, float], list[float]] = {}
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        for policy, rate, _seed, pct in pool.map(_run, jobs):
            missed.setdefault((policy, rate), []).append(pct)
    sla = config.max_violation_pct
    print(
        f"{config.workload}: runs of {requests} requests, seeds {args.seeds}; "
        f"holds: <= {sla:g} % missed; cell: seeds that held (range of the share missed, %)"
    )
    print("| policy | " + " | ".join(f"{r:,.0f} req/s" for r in rates) + " |")
    print("|---|" + "---|" * len(rates))
    for policy in policies:
        cells = []
        for rate in rates:
            pcts = missed[(policy, rate)]
            held = sum(p <= sla for p in pcts)
            cells.append(f"{held}/{len(pcts)} ({min(pcts):.2f}-{max(pcts):.2f})")
        print(f"| {policy} | " + " | ".join(cells) + " |")
    if args.json is not None:
        record = {
            "command": " ".join(sys.argv),
            "commit": started_at,
            "machine": machine(),
            "config": str(args.config),
            "workload": config.workload,
            "requests": requests,
            "seeds": seeds,
            "sla_max_violation_pct": sla,
            "wall_s": round(time.perf_counter() - started, 1),
            "runs": [
                {"policy": p, "rate_rps": r, "seed": s, "violation_pct": pct}
                for p in policies
                for r in rates
                for s, pct in zip(seeds, missed[(p, r)], strict=True)
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
