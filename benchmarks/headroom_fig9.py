"""The owned count's headroom on the Fig. 9 traces: what ``advisor.headroom`` costs where nothing
swings but the rate.

Each Fig. 9 config (embed on its CPU profile, an hour of a real trace scaled to its peak, seed 1),
slackwise's owned count at ``headroom: 0`` (the lean count) and at the default ``auto``, the rest
of the config as the Fig. 9 tables run it. The table gives replica-seconds, Swayam's window
compliance, and how many decisions carried a spare.

    .venv/bin/python benchmarks/headroom_fig9.py --jobs 2 \\
        --json experiments/sim/results/headroom-fig9.json \\
        > experiments/sim/results/headroom-fig9.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapter.policies.function_autoscaler import FunctionAutoscaler
from simulator.comparison import learning_scaler
from simulator.comparison_case import case_for, scaler_row
from simulator.config import load_sim_config
from simulator.engine import Simulation
from simulator.pool import map_jobs
from simulator.swayam_scalers import OwnedScaler
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

ROOT = Path(__file__).resolve().parent.parent
TRACES = ("nasa", "twitter", "big-spike", "steep-tri-phase")
SETTINGS: tuple[float | str, ...] = (0.0, "auto")


def _run(trace: str, headroom: float | str) -> dict[str, Any]:
    config = load_sim_config(ROOT / "experiments" / "sim" / f"autoscale-{trace}.yaml")
    auto = config.autoscaling
    assert auto is not None
    advisor = replace(auto.advisor, headroom=headroom)
    config = replace(config, autoscaling=replace(auto, advisor=advisor))
    case = case_for(config, config.rate_rps, config.seed)
    scaler, bootstrap = learning_scaler(config, "slackwise", case)
    sim = Simulation(
        config, case.policy, case.curves, rate_rps=config.rate_rps, requests=len(case.arrivals),
        seed=config.seed, scaler=scaler, arrivals=case.arrivals,
    )  # fmt: skip
    assert isinstance(scaler, OwnedScaler)
    counted = {"decisions": 0, "with_spare": 0}
    bind = scaler.bind

    def counted_bind(function: str, model: Any, limit: Any) -> None:
        bind(function, model, limit)  # the engine binds each function when it starts
        auto_fn = scaler.functions[function]
        auto_fn.decide = _counting(auto_fn, counted)  # type: ignore[method-assign]

    scaler.bind = counted_bind  # type: ignore[method-assign]
    result = sim.run()
    latencies, _ = sim.latencies_by_arrival()
    row = scaler_row("slackwise", result, latencies, case.slo_ms, case.level, case.auto,
                     case.setup_s, bootstrap, None)  # fmt: skip
    row.update(trace=trace, headroom=headroom, **counted)
    return row


def _counting(auto_fn: FunctionAutoscaler, counted: dict[str, int]) -> Any:
    """``auto_fn.decide`` that counts its decisions and those that carried a spare."""
    decide = auto_fn.decide

    def counting(*args: Any, **kwargs: Any) -> int:
        count = decide(*args, **kwargs)
        counted["decisions"] += 1
        counted["with_spare"] += int(auto_fn.last is not None and auto_fn.last.spare > 0)
        return count

    return counting


def _table(rows: list[dict[str, Any]]) -> None:
    print("| trace | headroom | replica-s | compliance % | / lean | decisions with a spare |")
    print("|---|---|---|---|---|---|")
    for trace in TRACES:
        mine = {r["headroom"]: r for r in rows if r["trace"] == trace}
        for h in SETTINGS:
            r = mine[h]
            ratio = r["replica_seconds"] / mine[0.0]["replica_seconds"]
            spared = f"{r['with_spare']} of {r['decisions']}" if "decisions" in r else "not counted"
            print(f"| {trace} | {h} | {r['replica_seconds']:.0f} | {r['compliance_pct']:.1f} "
                  f"| {ratio:.3f} | {spared} |")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument("--table", type=Path, help="print the table of a JSON written before")
    args = parser.parse_args(argv)
    if args.table:
        doc = json.loads(args.table.read_text())
        _table(doc["runs"])
        print(
            f"\nSeed 1 (each config's), experiments/sim/autoscale-*.yaml, commit {doc['commit']}."
        )
        return 0
    jobs = [(trace, h) for trace in TRACES for h in SETTINGS]
    rows = map_jobs(_run, jobs, args.jobs)
    _table(rows)
    print(f"\nSeed 1 (each config's), experiments/sim/autoscale-*.yaml, commit {commit(ROOT)}.")
    if args.json:
        command = " ".join(["benchmarks/headroom_fig9.py", *(argv or sys.argv[1:])])
        doc = {"runs": rows, "commit": commit(ROOT), "machine": machine(), "command": command}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
