"""What reacting to the past can reach on each Fig. 9 trace (:mod:`simulator.hindsight`).

For each trace, the past-only scaler with exact needs is run over a grid of holds and headrooms
(the same seeded hour as the Fig. 9 tables); each cell is its replica-seconds over ClairA2's and
its window compliance. ClairA1, ClairA2 and slackwise are run beside the grid, from the same
config and seed and the same code, so every ratio is of one revision.
The last columns are the cheapest point at ≥ 99 % compliance, what slackwise used against it, and
the target: slackwise within 1.05 × that point's replica-seconds, at ≥ 99 % compliance itself.

    .venv/bin/python benchmarks/scaler_frontier.py --jobs 2 \
        --references experiments/sim/results \
        --json experiments/sim/results/scaler-frontier.json \
        > experiments/sim/results/scaler-frontier.txt

``slackwise report`` copies the text into docs/simulator.md.

With ``--references DIR`` the three references are read from the Fig. 9 results in ``DIR``
(``autoscale-<trace>.json``, from ``slackwise report --run fig9``) instead of being run again
(ClairA2's trim alone is tens of runs): only when the code and config they came from are the
same as this checkout's (``git diff`` from the commit they record), else it stops and says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from simulator.comparison import scaler_run
from simulator.config import SimConfig, load_sim_config
from simulator.hindsight import hindsight_run
from simulator.pool import map_jobs
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

ROOT = Path(__file__).resolve().parent.parent
TRACES = {"NASA": "nasa", "Twitter": "twitter", "big spike (synthetic)": "big-spike",
          "steep tri phase (synthetic)": "steep-tri-phase", "Azure LLM code": "azure-llm-code",
          "Azure LLM conversation": "azure-llm-conv"}  # fmt: skip
HOLDS_S = (30.0, 60.0, 120.0, 300.0)
HEADROOMS = (1.0, 1.15, 1.3)
#: run beside the grid, same config and seed: the ratios' bases and the scaler to compare
REFERENCES = ("clair_a1", "clair_a2", "slackwise")
#: what the references' numbers depend on: a change here since their commit makes them stale
SOURCES = ("adapter", "slackwise_policies", "functions", "simulator", "slackwise_core", "traces")
#: Swayam's SLA compliance target, and slackwise's cost target: a fraction of the cheapest
#: compliant point of the grid (the minimal ClairA2's 0.75 was a target no past-only rule meets)
COMPLIANT_PCT, TARGET = 99.0, 1.05


def _job(config: SimConfig, scaler: str, hold_s: float, burst_u: float) -> dict[str, Any]:
    """One run: a Fig. 9 scaler (the references) or the past-only one at a grid point."""
    if scaler != "hindsight":
        return scaler_run(config, scaler, config.rate_rps, config.seed)
    return hindsight_run(config, hold_s=hold_s, burst_u=burst_u, rate_rps=config.rate_rps,
                         seed=config.seed)  # fmt: skip


def _table(
    traces: dict[str, dict[str, Any]],
    holds: tuple[float, ...] = HOLDS_S,
    headrooms: tuple[float, ...] = HEADROOMS,
) -> str:
    head = " | ".join(f"U {u:g}" for u in headrooms)
    lines = [
        f"| trace | hold s | {head} |",
        "|---|---|" + "---|" * len(headrooms),
    ]
    for label, doc in traces.items():
        cells = {(r["hold_s"], r["burst_u"]): r for r in doc["runs"]}
        for i, hold in enumerate(holds):
            row = [cells[(hold, u)] for u in headrooms]
            text = " | ".join(
                f"{r['vs_clair_a2']:.2f} × at {r['compliance_pct']:.1f} %" for r in row
            )
            lines.append(f"| {label if i == 0 else ''} | {hold:g} | {text} |")
    lines += [
        "",
        "| trace | cheapest at ≥ 99 % (hold, U) | / ClairA2 | / ClairA1 | "
        "slackwise / ClairA2 (compliance) | slackwise / cheapest | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, doc in traces.items():
        best = doc["cheapest_compliant"]
        where = "none" if best is None else f"{best['hold_s']:g} s, {best['burst_u']:g}"
        a2 = "-" if best is None else f"{best['vs_clair_a2']:.2f}"
        a1 = "-" if best is None else f"{best['vs_clair_a1']:.2f}"
        sw = doc["slackwise"]
        to_best = "-" if best is None else f"{sw['replica_seconds'] / best['replica_seconds']:.2f}"
        lines.append(f"| {label} | {where} | {a2} | {a1} | {sw['vs_clair_a2']:.2f} "
                     f"({sw['compliance_pct']:.1f} %) | {to_best} | ≤ {TARGET} |")  # fmt: skip
    return "\n".join(lines)


def _stored_references(directory: Path, name: str) -> dict[str, dict[str, Any]]:
    """The Fig. 9 rows of ``name`` kept in ``directory``, checked to be of this code and config."""
    path = directory / f"autoscale-{name}.json"
    try:
        doc = json.loads(path.read_text())
        rows, revision = doc["autoscalers"], str(doc["commit"])
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"--references: cannot read Fig. 9 results from {path}: {exc}") from None
    config = f"experiments/sim/autoscale-{name}.yaml"
    diff = subprocess.run(["git", "diff", "--quiet", revision, "HEAD", "--", *SOURCES, config],
                          cwd=ROOT, capture_output=True, check=False)  # fmt: skip
    if diff.returncode != 0:
        raise SystemExit(f"--references: {path} is of commit {revision}, and {config} or the "
                         f"code it ran ({', '.join(SOURCES)}) changed since (or that commit is "
                         "unknown here); re-run `slackwise report --run fig9` first")  # fmt: skip
    missing = [n for n in REFERENCES if n not in rows]
    if missing:
        raise SystemExit(f"--references: {path} has no row for {', '.join(missing)}")
    return {n: dict(rows[n], source=f"{path.name} at {revision}") for n in REFERENCES}


def _grid(parser: argparse.ArgumentParser, flag: str, text: str) -> tuple[float, ...]:
    """A comma-separated list of positive numbers, or the parser's error naming the flag."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        parser.error(f"{flag}: expected comma-separated numbers, got {text!r}")
    if not values or any(not v > 0 for v in values):
        parser.error(f"{flag}: every value must be > 0, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument("--traces", default=",".join(TRACES.values()),
                        help="which Fig. 9 traces (default all)")  # fmt: skip
    parser.add_argument("--references", type=Path, metavar="DIR",
                        help="take ClairA1, ClairA2 and slackwise from the Fig. 9 JSONs in DIR "
                        "(same code and config only) instead of running them")  # fmt: skip
    parser.add_argument("--holds", default=",".join(f"{h:g}" for h in HOLDS_S),
                        help="the grid's holds, seconds (default %(default)s)")  # fmt: skip
    parser.add_argument("--headrooms", default=",".join(f"{u:g}" for u in HEADROOMS),
                        help="the grid's headrooms U (default %(default)s)")  # fmt: skip
    args = parser.parse_args(argv)
    holds, headrooms = (
        _grid(parser, "--holds", args.holds),
        _grid(parser, "--headrooms", args.headrooms),
    )
    chosen = {k: v for k, v in TRACES.items() if v in args.traces.split(",")}
    out: dict[str, dict[str, Any]] = {}
    for label, name in chosen.items():
        config = load_sim_config(ROOT / f"experiments/sim/autoscale-{name}.yaml")
        grid = [(config, "hindsight", h, u) for h in holds for u in headrooms]
        if args.references is not None:
            refs = _stored_references(args.references, name)
            runs = map_jobs(_job, grid, args.jobs)
        else:
            rows = map_jobs(_job, [*((config, n, 0.0, 0.0) for n in REFERENCES), *grid], args.jobs)
            refs = dict(zip(REFERENCES, rows, strict=False))
            runs = rows[len(REFERENCES) :]
        for run in [*refs.values(), *runs]:
            for ref in ("clair_a1", "clair_a2"):
                run[f"vs_{ref}"] = round(run["replica_seconds"] / refs[ref]["replica_seconds"], 4)
        ok = [r for r in runs if r["compliance_pct"] >= COMPLIANT_PCT]
        out[label] = {
            "config": f"experiments/sim/autoscale-{name}.yaml",
            "clair_a1": refs["clair_a1"]["replica_seconds"],
            "clair_a2": refs["clair_a2"]["replica_seconds"],
            "references": refs,
            "slackwise": refs["slackwise"],
            "runs": runs,
            "cheapest_compliant": min(ok, key=lambda r: r["replica_seconds"]) if ok else None,
        }
        print(f"{label}: {len(runs)} runs", file=sys.stderr)
    print(_table(out, holds, headrooms))
    if args.json:
        doc = {"traces": out, "holds_s": holds, "headrooms": headrooms, "commit": commit(ROOT),
               "machine": machine(), "command": " ".join(sys.argv)}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
