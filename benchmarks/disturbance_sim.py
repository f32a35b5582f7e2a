"""Simulated disturbances on a Fig. 9 hour: how each scaler answers a slowdown, a stall and a
service that keeps swinging.

The Fig. 9 config (embed on its CPU profile, the hour of a real trace scaled to its peak) with a
disturbance of :mod:`simulator.disturbance` at the same seconds for every scaler: Knative's KPA,
slackwise's owned count (``headroom: auto``), and the owned count with no headroom (``headroom:
0``, the lean count); where the slowdown repeats, the headroom's curve (0, auto = 0.5, 1). The
owned count without its evidence rule (``advisor.evidence: false``) is kept as a label for the
ablation but not run by default (its last table: ``disturbance-7f8b077.txt``). Each over several
seeds; the table gives medians and ranges of:

* misses (% of requests over the SLO) among those that arrived inside the windows (in the first
  one and the later ones, where it repeats), and in the ``AFTER_S`` seconds after them (the
  backlog's aftermath);
* the hour's SLA compliance (Swayam's windows) and replica-seconds;
* how long after the window opened the count first rose above what it was (``rise s``: within
  one setup time is the issue's bar), and its peak inside the window and after.

    .venv/bin/python benchmarks/disturbance_sim.py --jobs 2 \\
        --json experiments/sim/results/disturbance.json \\
        > experiments/sim/results/disturbance.txt

``--kinds pause`` runs the stall alone (``slow`` the slowdowns).
``slackwise report`` copies the text into docs/advisor.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from simulator.comparison import learning_scaler
from simulator.comparison_case import case_for, scaler_row
from simulator.config import SimConfig, load_sim_config
from simulator.engine import Simulation
from simulator.pool import map_jobs
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine
from slackwise_config.model import Disturbance

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "experiments/sim/autoscale-twitter.yaml"
DISTURBANCES = {
    "every replica 3x slower for 300 s": Disturbance(
        kind="slow", start_s=1200.0, duration_s=300.0, factor=3.0
    ),
    "every replica stopped for 10 s": Disturbance(kind="pause", start_s=1200.0, duration_s=10.0),
    "every replica 2x slower for 30 s, every 240 s, 5 times": Disturbance(
        kind="slow", start_s=900.0, duration_s=30.0, factor=2.0, repeat=5, every_s=240.0
    ),
}
#: label: (scaler, evidence rule on, advisor.headroom)
SCALERS: dict[str, tuple[str, bool, float | str]] = {
    "kpa": ("kpa", True, "auto"),
    "slackwise": ("slackwise", True, "auto"),
    "slackwise, headroom 0 (lean)": ("slackwise", True, 0.0),
    "slackwise, headroom 1": ("slackwise", True, 1.0),
    "slackwise, no evidence rule": ("slackwise", False, "auto"),
}
#: which scalers run under which disturbance: the headroom's curve where the swings repeat
RUNS = {
    "every replica 3x slower for 300 s": ("kpa", "slackwise", "slackwise, headroom 0 (lean)"),
    "every replica stopped for 10 s": ("kpa", "slackwise", "slackwise, headroom 0 (lean)"),
    "every replica 2x slower for 30 s, every 240 s, 5 times": (
        "kpa", "slackwise, headroom 0 (lean)", "slackwise", "slackwise, headroom 1"),
}  # fmt: skip
AFTER_S = 120.0


def _run(config: SimConfig, label: str, seed: int) -> dict[str, Any]:
    name, evidence, headroom = SCALERS[label]
    auto, d = config.autoscaling, config.disturbance
    assert auto is not None and d is not None
    advisor = replace(auto.advisor, evidence=evidence, headroom=headroom)
    config = replace(config, autoscaling=replace(auto, advisor=advisor))
    case = case_for(config, config.rate_rps, seed)
    scaler, bootstrap = learning_scaler(config, name, case)
    sim = Simulation(
        config, case.policy, case.curves, rate_rps=config.rate_rps, requests=len(case.arrivals),
        seed=seed, scaler=scaler, arrivals=case.arrivals,
    )  # fmt: skip
    sim.decisions = []
    result = sim.run()
    latencies, _ = sim.latencies_by_arrival()
    row = scaler_row(name, result, latencies, case.slo_ms, case.level, case.auto, case.setup_s,
                     bootstrap, None)  # fmt: skip
    times = np.asarray(case.arrivals[: len(latencies)])
    late = latencies > case.slo_ms
    windows = d.windows()
    spans = [(times >= a) & (times < b) for a, b in windows]
    inside = np.logical_or.reduce(spans)
    after = np.logical_or.reduce([(times >= b) & (times < b + AFTER_S) for _, b in windows])
    after &= ~inside
    counts = [(t, desired) for t, _, desired, _ in sim.decisions]
    first, end = windows[0][0], windows[0][1]
    before = max((n for t, n in counts if first - 10.0 <= t < first), default=0)
    risen = [t for t, n in counts if t >= first and n > before]
    later = np.logical_or.reduce(spans[1:]) if len(spans) > 1 else None
    row.update(
        seed=seed,
        scaler=label,
        misses_inside_pct=round(100.0 * float(np.mean(late[inside])), 3),
        misses_after_pct=round(100.0 * float(np.mean(late[after])), 3),
        misses_first_pct=round(100.0 * float(np.mean(late[spans[0]])), 3),
        misses_later_pct=None if later is None else round(100.0 * float(np.mean(late[later])), 3),
        count_before=before,
        rise_s=round(risen[0] - first, 3) if risen else None,
        peak_inside=max((n for t, n in counts if first <= t < end), default=0),
        peak_after=max((n for t, n in counts if end <= t < end + AFTER_S), default=0),
    )
    return row


def _cell(values: list[float], digits: int = 1) -> str:
    med = statistics.median(values)
    if len(values) == 1 or min(values) == max(values):
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def _table(out: dict[str, Any]) -> str:
    lines = []
    for what, doc in out.items():
        lines += [
            f"**{what}** (from second {doc['disturbance']['start_s']:g}):",
            "",
            "| scaler | misses in the window % | misses after it % | compliance % | replica-s "
            "| count before | rise s | peak in / after |",
            "|---|---|---|---|---|---|---|---|",
        ]
        repeated = doc["disturbance"].get("repeat", 1) > 1
        if repeated:
            lines[-2:] = [
                "| scaler | misses in the windows % | in the first / the later ones % "
                "| misses after them % | compliance % | replica-s |",
                "|---|---|---|---|---|---|",
            ]
        for label in doc["scalers"]:
            runs = [r for r in doc["runs"] if r["scaler"] == label]
            rises = [r["rise_s"] for r in runs if r["rise_s"] is not None]
            missing = len(runs) - len(rises)
            rise = _cell(rises) + (f", none in {missing}" if missing else "")
            if repeated:
                lines.append(
                    f"| {label} | {_cell([r['misses_inside_pct'] for r in runs])} "
                    f"| {_cell([r['misses_first_pct'] for r in runs])} / "
                    f"{_cell([r['misses_later_pct'] for r in runs])} "
                    f"| {_cell([r['misses_after_pct'] for r in runs], 2)} "
                    f"| {_cell([r['compliance_pct'] for r in runs])} "
                    f"| {_cell([r['replica_seconds'] for r in runs], 0)} |"
                )
                continue
            lines.append(
                f"| {label} | {_cell([r['misses_inside_pct'] for r in runs])} "
                f"| {_cell([r['misses_after_pct'] for r in runs], 2)} "
                f"| {_cell([r['compliance_pct'] for r in runs])} "
                f"| {_cell([r['replica_seconds'] for r in runs], 0)} "
                f"| {_cell([r['count_before'] for r in runs], 0)} | {rise if rises else 'none'} "
                f"| {_cell([r['peak_inside'] for r in runs], 0)} / "
                f"{_cell([r['peak_after'] for r in runs], 0)} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated (default 1,2,3)")
    parser.add_argument("--config", default=CONFIG, help=f"a Fig. 9 config (default {CONFIG})")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument(
        "--kinds",
        default="slow,pause",
        help="comma-separated disturbance kinds to run (default slow,pause: all of them)",
    )
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}
    unknown = kinds - {d.kind for d in DISTURBANCES.values()}
    if unknown or not kinds:
        parser.error(f"--kinds: unknown kind(s) {sorted(unknown)!r}; known: slow, pause")
    chosen = {what: d for what, d in DISTURBANCES.items() if d.kind in kinds}
    base = load_sim_config(ROOT / args.config)
    jobs = [(replace(base, disturbance=d), label, seed)
            for what, d in chosen.items() for label in RUNS[what]
            for seed in seeds]  # fmt: skip
    rows = map_jobs(_run, jobs, args.jobs)
    out: dict[str, Any] = {}
    for what, d in chosen.items():
        runs = [r for r, job in zip(rows, jobs, strict=True) if job[0].disturbance == d]
        out[what] = {"disturbance": asdict(d), "scalers": list(RUNS[what]), "runs": runs}
    print(_table(out), end="")
    print(f"\nMedians of seeds {args.seeds} (range); {args.config}; commit {commit(ROOT)}.")
    if args.json:
        doc = {
            "config": args.config, "seeds": seeds, "after_s": AFTER_S, "disturbances": out,
            "commit": commit(ROOT), "machine": machine(), "command": " ".join(sys.argv),
        }  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
