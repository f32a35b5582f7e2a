"""The past-only frontier with one setting for every trace, against slackwise's one setting.

The frontier (``benchmarks/scaler_frontier.py``) runs the past-only scaler with exact needs over
a grid of holds and headrooms, and its cheapest compliant point is chosen per trace, after the
hour: NASA's is a 120 s hold at U 1.15, big spike's 30 s at U 1. A scaler deployed on traffic it
has not seen chooses its settings before it, as slackwise's configs do (one setting for every
trace). This reads the frontier's JSONs and asks the same question of each grid setting held
fixed across every trace they hold: its replica-seconds over each trace's cheapest compliant
point, and whether it complies (>= 99 % of the windows) on all of them. Grids of several JSONs
are merged per trace (a finer grid around the settings that comply, run with
``scaler_frontier.py --holds ... --headrooms ...``). Nothing is run.

    .venv/bin/python benchmarks/frontier_one_setting.py \
        experiments/sim/results/scaler-frontier.json \
        experiments/sim/results/scaler-frontier-azure.json \
        > experiments/sim/results/frontier-one-setting.txt

``slackwise report`` copies the text into docs/simulator.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

COMPLIANT_PCT = 99.0


def _cell(run: dict[str, Any], cheapest: float) -> str:
    mark = "" if run["compliance_pct"] >= COMPLIANT_PCT else " (under 99)"
    return f"{run['replica_seconds'] / cheapest:.2f} × at {run['compliance_pct']:.1f} %{mark}"


def _geomean(runs: list[dict[str, Any]], cheapest: list[float]) -> str:
    logs = [math.log(r["replica_seconds"] / c) for r, c in zip(runs, cheapest, strict=True)]
    return f"{math.exp(sum(logs) / len(logs)):.2f} ×"


def table(traces: dict[str, dict[str, Any]], commits: list[str]) -> str:
    names = list(traces)
    cheapest = {
        n: min(r["replica_seconds"] for r in traces[n]["runs"]
               if r["compliance_pct"] >= COMPLIANT_PCT)
        for n in names
    }  # fmt: skip
    settings = sorted({(r["hold_s"], r["burst_u"]) for t in traces.values() for r in t["runs"]})
    lines = [
        "| hold s, U | " + " | ".join(names) + " | geometric mean | compliant on every trace |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    everywhere = []
    for hold, u in settings:
        runs = {}
        for n in names:
            found = [r for r in traces[n]["runs"] if (r["hold_s"], r["burst_u"]) == (hold, u)]
            if found:
                runs[n] = found[0]
        if len(runs) < len(names):
            continue
        ok = all(r["compliance_pct"] >= COMPLIANT_PCT for r in runs.values())
        if ok:
            everywhere.append((hold, u))
        cells = " | ".join(_cell(runs[n], cheapest[n]) for n in names)
        mean = _geomean([runs[n] for n in names], [cheapest[n] for n in names])
        lines.append(f"| {hold:g} s, {u:g} | {cells} | {mean} | {'yes' if ok else 'no'} |")
    ours = {n: traces[n]["slackwise"] for n in names}
    ok = all(r["compliance_pct"] >= COMPLIANT_PCT for r in ours.values())
    cells = " | ".join(_cell(ours[n], cheapest[n]) for n in names)
    verdict = "yes" if ok else "no"
    mean = _geomean([ours[n] for n in names], [cheapest[n] for n in names])
    lines.append(f"| **slackwise** (the configs' one setting) | {cells} | {mean} | {verdict} |")
    below = [
        (hold, u)
        for hold, u in everywhere
        if all(
            ours[n]["replica_seconds"] <= r["replica_seconds"]
            for n in names
            for r in traces[n]["runs"]
            if (r["hold_s"], r["burst_u"]) == (hold, u)
        )
    ]
    lines += [
        "",
        "Each cell: replica-seconds over that trace's cheapest compliant point of every grid "
        "read (chosen per trace), and window compliance. "
        f"Settings compliant on every trace: {', '.join(f'{h:g} s at U {u:g}' for h, u in everywhere) or 'none'}; "  # noqa: E501
        f"of those, slackwise costs no more than {len(below)} of {len(everywhere)} on every trace. "
        f"From {', '.join(commits)}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+", type=Path, help="frontier JSONs (scaler_frontier.py)")
    args = parser.parse_args(argv)
    traces: dict[str, dict[str, Any]] = {}
    commits = []
    for path in args.json:
        try:
            doc = json.loads(path.read_text())
            for name, trace in doc["traces"].items():
                merged = traces.setdefault(name, {"runs": [], "slackwise": trace["slackwise"]})
                merged["runs"] += trace["runs"]
                if merged["slackwise"]["replica_seconds"] != trace["slackwise"]["replica_seconds"]:
                    print(f"frontier_one_setting: {path} has another slackwise run of {name} "
                          "than the first file's; the first is kept", file=sys.stderr)  # fmt: skip
        except (OSError, ValueError, KeyError) as exc:
            print(f"frontier_one_setting: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        commits.append(f"{path.name} (grid at {doc.get('commit', '?')})")
    print(table(traces, commits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
