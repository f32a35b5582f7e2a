"""Each GrandSLAM workload's throughput ceiling (:mod:`simulator.bounds`) beside what GS, GS-T
and the best baselines reached, from their result JSONs: how much room any policy had to gain,
and the fraction of the ceiling GS-T reached (of the ceiling as such, and of the ceiling with
each stage's wait for a free slot, :func:`simulator.bounds.waited_ceiling`, and of the bound with
a batch's fill and its service time's spread, :func:`simulator.tail_bound.tail_ceiling`), and
GS-TB's (GS-T's batching with Eq. 4's split: the ablation), with the commit GS-T's result was
run at.

    .venv/bin/python benchmarks/throughput_ceiling.py \
        > experiments/sim/results/throughput-ceiling.txt

``slackwise report`` copies the text into docs/simulator.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from simulator.bounds import throughput_ceiling, waited_ceiling
from simulator.config import load_sim_config
from simulator.runner import curves_for
from simulator.tail_bound import tail_ceiling

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("wl1-cpu", "wl2-cpu", "wl1-gpu", "wl2-gpu", "wl1-cpu-1000", "wl2-cpu-1000",
             "wl1-mixed", "wl2-mixed", "wl1-mixed-late", "wl1-cpu-inputs")  # fmt: skip


def _best(policies: dict[str, dict[str, float]], paper: bool) -> tuple[str, float]:
    rows = {n: r["max_rps_at_sla"] for n, r in policies.items()
            if not n.startswith("GS") and n.endswith("-paper") == paper
            and r.get("max_rps_at_sla") is not None}  # fmt: skip
    if not rows:
        return "-", float("nan")
    name = max(rows, key=rows.__getitem__)
    return name, rows[name]


def main() -> int:
    print(
        "| workload | ceiling rps (set by, at batch) | with a slot's wait | "
        "with fill and spread (set by) | GS | GS-T | "
        "best strengthened | best as in the paper | ceiling / best baseline | "
        "GS-T / ceiling | GS-T / with the wait | GS-T / with fill and spread | "
        "GS-T / best baseline | GS-TB | GS-TB / ceiling | "
        "GS-T's commit |"
    )
    print("|---" * 16 + "|")
    for name in WORKLOADS:
        config = load_sim_config(ROOT / "experiments" / "sim" / f"{name}.yaml")
        curves = curves_for(config)
        ceiling = throughput_ceiling(config, curves)
        waited = waited_ceiling(config, curves)
        spread = tail_ceiling(config, curves)
        doc = json.loads((ROOT / "experiments/sim/results" / f"{name}.json").read_text())
        policies = doc["policies"]
        gs = policies["GS"]["max_rps_at_sla"]
        gs_t = policies.get("GS-T", {}).get("max_rps_at_sla")
        strong, strong_rps = _best(policies, paper=False)
        paper, paper_rps = _best(policies, paper=True)
        best = max(r for r in (strong_rps, paper_rps) if r == r)
        _, batch = ceiling.functions[ceiling.binding]
        shown = f"{paper} {paper_rps:.0f}" if paper_rps == paper_rps else "(not run)"
        if gs_t is None:
            t_cells = "(not run) | - | - | - | -"
        else:
            t_cells = (f"{gs_t:.0f} | {gs_t / ceiling.rate_rps:.2f} | {gs_t / waited:.2f} | "
                       f"{gs_t / spread.rate_rps:.2f} | {gs_t / best:.2f}")  # fmt: skip
        t_rps, *t_rest = t_cells.split(" | ")
        gs_tb = policies.get("GS-TB", {}).get("max_rps_at_sla")
        tb_cells = "- | -" if gs_tb is None else f"{gs_tb:.0f} | {gs_tb / ceiling.rate_rps:.2f}"
        # a policy re-run with --update records its own commit; else the file's run is its own
        ran_at = policies.get("GS-T", {}).get("commit") or doc.get("commit") or "-"
        print(
            f"| {name} | {ceiling.rate_rps:.0f} ({ceiling.binding}, {batch}) | {waited:.0f} | "
            f"{spread.rate_rps:.0f} ({spread.binding}) | "
            f"{gs:.0f} | {t_rps} | {strong} {strong_rps:.0f} | {shown} | "
            f"{ceiling.rate_rps / best:.2f} | {' | '.join(t_rest)} | {tb_cells} | {ran_at} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
