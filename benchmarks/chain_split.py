"""The img-query chain live under several stage policies: the largest rate under the SLO, and each
stage's P99 there.

Run: ``.venv/bin/python benchmarks/chain_split.py --repeat 3 --json
docs/results/chain-split.json --docs docs/benchmarks.md``

Each repeat serves ``experiments/chains/img-query-fixed.yaml`` (one replica per function, nothing
scaled) once per policy (``adapter.stage_policy``; the order turns by one each repeat, so no
policy always goes first), finds the largest open-loop rate at which ``POST
/v1/apps/img-query:predict`` passes the rule of ``make bench-peers`` (``benchmarks/peer_sweep.py``:
P95 within the SLO, P99 within twice it, under 0.1 % errors) from the closed-loop throughput by
bisection, then offers that rate once more and reads each stage's latency (arrival at the stage
to its answer) from the adapter's request records (``adapter.records``). The JSON records the
commit, the machine, the versions and every probe; the medians and ranges of the repeats go into
the docs table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from peer_sweep import Probe, measure, median_and_range, sweep
from peer_systems import ROOT, Running, serve_command

from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

CONFIG = ROOT / "experiments" / "chains" / "img-query-fixed.yaml"
APP = "img-query"
#: the model whose sample inputs the first stage takes
FIRST_MODEL = "imagenet"
BEGIN = "<!-- chain split table: benchmarks/chain_split.py -->"
END = "<!-- end chain split table -->"


def _config(policy: str, records: Path, out_dir: Path) -> tuple[Path, dict[str, Any]]:
    doc = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    doc["adapter"]["stage_policy"] = policy
    doc["adapter"]["records"] = str(records)
    path = out_dir / f"img-query-{policy}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path, doc


@contextlib.contextmanager
def serving(config: Path, port: int, log: Path, label: str) -> Iterator[Running]:
    """``slackwise serve -c config`` until the block ends, ready once the chain answers."""
    cmd = [sys.executable, "-m", "slackwise_cli.main", "serve", "-c", str(config)]
    url = f"http://127.0.0.1:{port}/v1/apps/{APP}:predict"
    with serve_command(cmd, url, label, log, FIRST_MODEL) as run:
        yield run


def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open(encoding="utf-8") as f:
        return sum(1 for _ in f)


def stage_latencies(records: Path, skip: int, stages: list[str]) -> dict[str, dict[str, float]]:
    """Each stage's P50 and P99 (ms, arrival at the stage to its answer) over the function
    records of the chain after the first ``skip`` lines of ``records``."""
    by_stage: dict[str, list[float]] = {s: [] for s in stages}
    with records.open(encoding="utf-8") as f:
        for index, line in enumerate(f):
            if index < skip or not line.strip():
                continue
            r = json.loads(line)
            if r.get("app") == APP and r.get("function") in by_stage and r.get("status") == 200:
                by_stage[r["function"]].append(1000.0 * (r["done"] - r["arrival"]))
    out = {}
    for stage, values in by_stage.items():
        if values:
            p50, p99 = np.percentile(values, [50, 99])
            out[stage] = {"p50_ms": round(float(p50), 1), "p99_ms": round(float(p99), 1),
                          "requests": len(values)}  # fmt: skip
    return out


def one_policy(policy: str, index: int, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    records = out_dir / f"records-{policy}-{index}.jsonl"
    config, doc = _config(policy, records, out_dir)
    slo_ms = float(doc["apps"][APP]["slo_ms"])
    stages = list(doc["apps"][APP]["stages"])
    probe = Probe(args.warmup_s, args.duration_s, seed=index)
    log = out_dir / f"serve-{policy}-{index}.log"
    with serving(config, int(doc["adapter"]["port"]), log, policy) as run:
        found = sweep(run, FIRST_MODEL, slo_ms, probe, args.refine)
        rate = found["max_rate"]
        if rate:
            time.sleep(1.5)  # the records of the search are flushed (once a second)
            skip = _lines(records)
            again = measure(run, FIRST_MODEL, rate, slo_ms, probe)
            time.sleep(1.5)
            found["at_max_again"] = again
            found["stages"] = stage_latencies(records, skip, stages)
    return {"policy": policy, "slo_ms": slo_ms, **found}


def _rotate(policies: list[str], index: int) -> list[str]:
    k = index % len(policies)
    return policies[k:] + policies[:k]


def summary(runs: list[dict[str, Any]], policies: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in policies:
        mine = [r for r in runs if r["policy"] == policy]
        stages = sorted({s for r in mine for s in r.get("stages", {})})
        out[policy] = {
            "max_rate": median_and_range([r["max_rate"] for r in mine]),
            "p99_at_max": median_and_range(
                [(r.get("at_max_again") or {}).get("p99_ms") for r in mine]
            ),
            "stage_p99_ms": {
                s: median_and_range([r.get("stages", {}).get(s, {}).get("p99_ms") for r in mine])
                for s in stages
            },
            "runs": len(mine),
        }
    return out


def _span(m: dict[str, float | None]) -> str:
    if m["median"] is None:
        return "-"
    low, high = round(m["low"] or 0.0, 1), round(m["high"] or 0.0, 1)
    if low == high:
        return f"{m['median']:g}"
    return f"{m['median']:g} ({low:g}-{high:g})"


def table(doc: dict[str, Any]) -> str:
    stages: list[str] = doc["settings"]["stages"]
    head = ["policy", "max rate under the SLO, req/s", "P99 at it, ms",
            *[f"{s} P99 ms" for s in stages]]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for policy, s in doc["summary"].items():
        cells = [policy, _span(s["max_rate"]), _span(s["p99_at_max"])]
        cells += [_span(s["stage_p99_ms"].get(st, {"median": None})) for st in stages]
        lines.append("| " + " | ".join(cells) + " |")
    meta = doc["meta"]
    lines += ["", f"{len(doc['runs']) // max(1, len(doc['summary']))} repeats at "
              f"{meta['commit']} on {meta['machine'].get('cpu', '?')} "
              f"({meta['machine'].get('cores', '?')} cores), {meta['started']} UTC; medians "
              "with ranges; `benchmarks/chain_split.py`."]  # fmt: skip
    return "\n".join(lines)


def write_docs(path: Path, doc: dict[str, Any]) -> None:
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path} has no {BEGIN!r} ... {END!r} block to fill")
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + BEGIN + "\n" + table(doc) + "\n" + END + rest.split(END, 1)[1],
                    encoding="utf-8")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default="GS-T,GS,ED-DYN")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--refine", type=int, default=3)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--docs", type=Path, help="a markdown file with the table's markers")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    policies = [p for p in args.policies.split(",") if p]
    doc: dict[str, Any] = {
        "meta": {
            "command": " ".join(["benchmarks/chain_split.py", *(argv or sys.argv[1:])]),
            "commit": commit(ROOT), "machine": machine(),
            "started": time.strftime("%Y-%m-%dT%H:%M", time.gmtime()),
        },
        "settings": {"config": str(CONFIG.relative_to(ROOT)), "policies": policies,
                     "warmup_s": args.warmup_s, "duration_s": args.duration_s,
                     "refine": args.refine,
                     "stages": yaml.safe_load(CONFIG.read_text())["apps"][APP]["stages"]},
        "runs": [],
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.repeat):
            for policy in _rotate(policies, index):
                print(f"repeat {index + 1}/{args.repeat}: {policy}", flush=True)
                doc["runs"].append(one_policy(policy, index, args, Path(tmp)))
                doc["summary"] = summary(doc["runs"], policies)
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(table(doc))
    if args.docs:
        write_docs(args.docs, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
