"""Profiles measured inside a live chain run, for the simulator's live-vs-simulated check.

A profile (``slackwise profile``) times a function alone on a quiet machine. Inside a live
experiment every batch also crosses the adapter, the platform's gateway and the replica's HTTP
and JSON layers, with every process sharing the same cores, so a stage's round trip is several
times its compute. The simulator models a stage's service time from a profile; to check the
simulator's *queueing and policies* against a live run rather than the machine's contention, feed
it the round trips that run measured.

This script reads the replayer's records of one live app run (``slackwise experiment --plots DIR``
keeps them as ``DIR/MODE.jsonl``): for each request, the ``Server-Timing`` header holds each
stage's upstream round trip and ``X-Batch-Size`` each stage's batch size. Per stage and batch size
it takes the median and the P95 of the round trips, and writes ``OUT/<kind>.json``: the
function's own profile with its HTTP table and linear fit replaced by the live ones (batch sizes
seen fewer than ``--min-samples`` times are left out).

    python benchmarks/calibrate_from_live.py runs/validate/GS.jsonl \\
        --stages classify=imagenet,nlu=ner,answer=qa --out runs/validate/profiles
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from functions.profiles import packaged  # noqa: E402
from slackwise_cli.results import stage_samples  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, nargs="+", help="replayer records (JSON lines)")
    parser.add_argument("--stages", required=True, help="stage=kind,... in chain order")
    parser.add_argument("--out", type=Path, required=True, help="directory for <kind>.json")
    parser.add_argument("--min-samples", type=int, default=5)
    args = parser.parse_args()
    pairs = [item.split("=", 1) for item in args.stages.split(",")]
    if any(len(p) != 2 for p in pairs):
        parser.error(f"--stages: expected stage=kind,..., got {args.stages!r}")
    stages = [(stage, kind) for stage, kind in pairs]
    samples: dict[str, dict[int, list[float]]] = {s: defaultdict(list) for s, _ in stages}
    for stage, pairs_seen in stage_samples(args.records, [s for s, _ in stages]).items():
        for size, ms in pairs_seen:
            samples[stage][size].append(ms)
    args.out.mkdir(parents=True, exist_ok=True)
    for stage, kind in stages:
        table = {
            str(n): {
                "median": round(float(np.median(v)), 3),
                "p95": round(float(np.percentile(v, 95)), 3),
            }
            for n, v in sorted(samples[stage].items())
            if len(v) >= args.min_samples
        }
        if not table:
            print(f"{stage}: no batch size with {args.min_samples} samples", file=sys.stderr)
            return 1
        profile = json.loads(packaged(kind).read_text(encoding="utf-8"))
        profile["batch_ms"]["http"] = table
        xs = np.array([int(n) for n in table], dtype=float)
        ys = np.array([row["median"] for row in table.values()])
        b = float(np.polyfit(xs, ys, 1)[0]) if len(xs) > 1 else 0.0
        a = float(ys.mean() - b * xs.mean())
        profile["linear_fit"] = {"a_ms": round(a, 3), "b_ms_per_item": round(max(b, 0.0), 3)}
        profile["measured_at"] = f"live run: {', '.join(str(p) for p in args.records)}"
        (args.out / f"{kind}.json").write_text(json.dumps(profile, indent=1) + "\n")
        counts = {n: len(v) for n, v in sorted(samples[stage].items())}
        print(f"{stage} ({kind}): {table}  samples per size {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
