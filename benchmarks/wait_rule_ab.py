"""Rule 6 (wait for company only when it pays) before and after, on imagenet at fixed rates.

``.venv/bin/python benchmarks/wait_rule_ab.py --baseline REV --repeat 3 --json
docs/results/wait_rule_ab.json`` serves imagenet the way ``benchmarks/peers.py`` found slackwise at
its best (two warm replicas, ``experiments/peers/imagenet.yaml``), once from this revision and once
from ``REV`` (checked out with ``git worktree`` into a temporary folder, run with this venv),
interleaved, and offers each the same open-loop Poisson rates (the peers' fixed rates, 20 and 60
req/s; SLO 200 ms). It prints and records P50, P95, P99, the mean batch and the CPU a request, per
revision and rate: medians of the repeats with their ranges.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from peer_sweep import Probe, measure
from peer_systems import ROOT, Setup, start

from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

RATES = (20.0, 60.0)
SLO_MS = 200.0
KEYS = ("p50_ms", "p95_ms", "p99_ms", "mean_batch", "cpu_ms_per_request")


def _cells(tree: Path, label: str, repeat: int, out_dir: Path) -> list[dict[str, Any]]:
    """Both rates against one revision's slackwise (its code first on the path)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    try:
        setup = Setup("slackwise", (("replicas", 2),))
        with start(setup, "imagenet", out_dir, ROOT / ".bench") as running:
            return [
                {"revision": label, "repeat": repeat,
                 **measure(running, "imagenet", rate, SLO_MS, Probe(5.0, 20.0, repeat))}
                for rate in RATES
            ]  # fmt: skip
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def _stat(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the earlier revision (a git rev)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    base = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=ROOT, text=True,
                          capture_output=True)  # fmt: skip
    if base.returncode != 0:
        parser.error(f"--baseline {args.baseline!r} is not a revision of this repository")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), args.baseline],
                       cwd=ROOT, check=True)  # fmt: skip
        try:
            for r in range(1, args.repeat + 1):
                sides = [("baseline", tree), ("this", ROOT)]
                for label, where in sides if r % 2 else sides[::-1]:
                    for cell in _cells(where, label, r, Path(tmp)):
                        print(json.dumps(cell), flush=True)
                        runs.append(cell)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    summary = [
        {"rate": rate, **{label: {k: _stat([float(c[k]) for c in runs
                                            if c["rate"] == rate and c["revision"] == label])
                                  for k in KEYS} for label in ("baseline", "this")}}
        for rate in RATES
    ]  # fmt: skip
    for row in summary:
        for label in ("baseline", "this"):
            cells = row[label]
            print(f"{row['rate']:g} req/s {label}: " + ", ".join(
                f"{k} {v['median']:.1f} ({v['low']:.1f}-{v['high']:.1f})" for k, v in cells.items()
            ))  # fmt: skip
    result = {"runs": runs, "summary": summary, "meta": {
        "command": " ".join(["python", "benchmarks/wait_rule_ab.py", *(argv or sys.argv[1:])]),
        "commit": commit(ROOT), "baseline": base.stdout.strip(),
        "machine": machine(),
        "setup": "slackwise, 2 replicas, experiments/peers/imagenet.yaml", "slo_ms": SLO_MS,
        "probe": {"warmup_s": 5.0, "duration_s": 20.0}, "date": time.strftime("%Y-%m-%d"),
    }}  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
