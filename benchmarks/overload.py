"""Overload: three workloads driven open loop from half to ten times their measured capacity.

Run: ``make bench-overload`` (``.venv/bin/python benchmarks/overload.py --repeat 3 --json
docs/results/overload.json --docs docs/reliability.md``): about 60 minutes on the two-core VM
(the estimate is printed at the start). ``--from-json FILE --docs FILE`` only re-renders the
tables.

Three workloads, each ``slackwise serve -c experiments/overload/NAME.yaml`` (min-scale 1,
max-scale 2, containerConcurrency 1, every other value the default): **digits** (SLO 100 ms;
the model costs next to nothing, so the adapter is what limits it), **embed** (SLO 300 ms;
model-bound) and **img-query** (``POST /v1/apps/img-query:predict``, the chain classify ->
nlu -> answer under a 400 ms SLO; the load generator sends the first stage's imagenet inputs).

CPU layout: the load generator (``benchmarks/loadgen.py``, its own process) is pinned with
``taskset`` to the last CPU this process may use, and this process (it polls the status routes
and samples the adapter) pins itself there too; the adapter and its replica processes (they
inherit its affinity) get the other CPUs, so the adapter's share does not shrink as the offered
load grows. The layout is in the JSON.

For each repeat, workload and client kind, a fresh adapter, then its capacity, measured open loop
with the same generator and pinning: the largest rate at which >= 99 % of the requests sent are
answered 200 within the SLO (a closed-loop estimate, 32 clients, then six keep-alive probes of
1.5 s warm-up and 5-12 s measured, at least 100 requests, stepping from it x1.5 up or x0.7 down
until a pass and a failure bracket it, then bisecting; every probe is in the JSON). Then at 0.5,
1, 2, 3 and 10 times that capacity, open-loop Poisson load (2 s warm-up, 8 s measured) from
keep-alive clients or a new connection per request, while the status route ``GET
/v1/models/{fn}`` is polled every 50 ms on the adapter's port and on its probe port and the
adapter's RSS is sampled, during the load and for 10 s after.

Time: per adapter start about 5-25 s to come up, 1-1.5 minutes of capacity search and 5 cells of
about 21 s; 18 starts (3 workloads x 2 kinds x 3 repeats) make about 55-60 minutes.

Reported per cell (medians over the repeats, ranges in brackets): goodput (answers 200 within
the SLO, from when each request left the client, per measured second) and its share of the
capacity, the share of the answered requests within the SLO, the rate offered and on the wire,
refusals (429/503), their P99 and those without ``Retry-After``, client timeouts, the adapter's
RSS (idle, peak, 10 s after), the status route's P99 on both ports, the CPU of the adapter
process and of its replicas (cores) over the measured window, and which targets the cell meets
(``benchmarks/overload_report.py``). Per workload and client kind, the adapter process's CPU
seconds are fitted over that run's cells as ``c0·T + a·answers + r·refusals``: a and r (µs)
are printed, and for digits the bound ``C / (1 + (k-1)·r/a)`` its goodput is held to.
The pieces: ``overload_setup.py`` (workloads, layout, the adapter), ``overload_cells.py`` (a
loadgen run, a cell, the capacity search), ``overload_report.py`` (fit, targets, tables).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from capacity_search import MAX_PROBES, PROBES
from overload_cells import (
    CLOSED_LOOP_CLIENTS,
    CLOSED_LOOP_S,
    CLOSED_LOOP_WARMUP_S,
    PROBE_MAX_S,
    PROBE_MIN_S,
    PROBE_PASS,
    PROBE_REQUESTS,
    PROBE_WARMUP_S,
    capacity,
    cell,
    probe_s,
)
from overload_report import summarize, table
from overload_setup import CLIENT_TIMEOUT_S, PY, ROOT, WORKLOADS, Adapter, Layout, Workload

from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

MULTIPLES = (0.5, 1.0, 2.0, 3.0, 10.0)
KINDS = ("keep-alive", "new connection")
#: a loadgen process's own start (imports, sample bodies) and the pauses around it, roughly
LOADGEN_START_S = 1.0
#: whose versions the JSON records (those installed)
PACKAGES = (
    "slackwise",
    "numpy",
    "httptools",
    "uvloop",
    "httpx",
    "psutil",
    "onnxruntime",
    "torch",
    "sentence-transformers",
    "spacy",
)


def estimate_s(
    workloads: list[Workload], kinds: int, multiples: int, repeat: int, timing: dict[str, float]
) -> float:
    """How long the run takes, about: adapter starts, capacity searches and cells."""
    search = CLOSED_LOOP_WARMUP_S + CLOSED_LOOP_S + 1.0 + (PROBES + 1) * LOADGEN_START_S
    per_cell = timing["warmup_s"] + timing["duration_s"] + timing["after_s"] + LOADGEN_START_S
    per_start = [
        w.startup_s + search + PROBES * (PROBE_WARMUP_S + probe_s(w.typical_rps) + 1.0)
        for w in workloads
    ]
    per_start = [s + multiples * per_cell for s in per_start]
    return repeat * kinds * sum(per_start)


def measure(
    workloads: list[Workload],
    kinds: tuple[str, ...],
    multiples: tuple[float, ...],
    repeat: int,
    timing: dict[str, float],
    records: Path | None = None,
) -> dict[str, Any]:
    layout = Layout.split()
    layout.pin_self()
    results: dict[str, dict[str, Any]] = {
        w.name: {
            "config": w.config,
            "slo_ms": w.slo_ms,
            "bound": w.bound,
            "predict_url": w.predict_url(),
            "sample_model": w.sample_model,
            "status_urls": list(w.status_urls()),
            "capacity": [],
            "runs": [],
        }
        for w in workloads
    }
    for r in range(1, repeat + 1):
        for w in workloads:
            for kind in kinds:
                slug = kind.split()[0]  # keep-alive, new
                kept = None if records is None else records / f"{w.name}-{slug}-r{r}.jsonl"
                adapter = Adapter(w, layout, kept)
                try:
                    found = capacity(w, layout, adapter)
                    found.update(repeat=r, kind=kind, startup_s=adapter.startup_s)
                    found["affinity"] = adapter.affinity()
                    results[w.name]["capacity"].append(found)
                    cap = float(found["capacity_rps"])
                    probes = ", ".join(
                        f"{p['rate']:.0f}{'+' if p['passed'] else '-'}" for p in found["probes"]
                    )
                    print(
                        f"{w.name} {kind} repeat {r}: capacity {cap:.0f} req/s (closed loop "
                        f"{found['closed_loop_rps']}; probes {probes}; the adapter started in "
                        f"{adapter.startup_s:g} s)"
                        + ("" if found["bracketed"] else ": a lower bound, no probe failed"),
                        flush=True,
                    )
                    for multiple in multiples:
                        out = cell(w, layout, adapter, multiple * cap, kind != "keep-alive", timing)
                        out.update(repeat=r, kind=kind, multiple=multiple, capacity_rps=cap)
                        results[w.name]["runs"].append(out)
                        print(_line(w.name, out), flush=True)
                finally:
                    adapter.stop()
    for workload in results.values():
        summarize(workload)
    return {"layout": layout.as_json(), "workloads": results}


def _line(name: str, c: dict[str, Any]) -> str:
    share = c["goodput_rps"] / c["capacity_rps"] if c["capacity_rps"] else 0.0
    return (
        f"  {name} {c['kind']} {c['multiple']:g}x: goodput {c['goodput_rps']} req/s "
        f"({100 * share:.0f} % of C), on the wire {c['on_wire_rps']}, answered {c['ok']} "
        f"({c['ok_within_slo']} in SLO, given up {c['given_up']}; the door saw "
        f"{c.get('door_late')} of {c.get('door_finished')} admitted finish late), "
        f"refused {c['refused']} (P99 {c['refusal_p99_ms']} ms, "
        f"{c['refused_without_retry_after']} without Retry-After), timeouts {c['timeouts']}, "
        f"status P99 {c['status_p99_ms']} / {c['probe_status_p99_ms']} ms, RSS "
        f"{c['rss_idle_mb']} / {c['rss_peak_mb']} / {c['rss_after_mb']} MB, "
        f"{c['adapter_cores']} cores"
    )


def begin(name: str) -> str:
    return f"<!-- overload table {name}: benchmarks/overload.py -->"


def end(name: str) -> str:
    return f"<!-- end overload table {name} -->"


def write_docs(path: Path, result: dict[str, Any]) -> None:
    """Replaces each measured workload's marked table in ``path``."""
    text = path.read_text(encoding="utf-8")
    for name, workload in result["workloads"].items():
        if begin(name) not in text or end(name) not in text:
            raise SystemExit(f"overload: {path} has no {begin(name)} ... {end(name)} block")
        start = text.index(begin(name)) + len(begin(name))
        stop = text.index(end(name), start)
        text = text[:start] + "\n" + table(workload) + "\n" + text[stop:]
    path.write_text(text, encoding="utf-8")


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _dirty() -> bool | None:
    try:
        command = ["git", "status", "--porcelain", "--untracked-files=no"]
        status = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return bool(status.stdout.strip())


def meta(argv: list[str], workloads: list[Workload], timing: dict[str, float]) -> dict[str, Any]:
    closed = {"clients": CLOSED_LOOP_CLIENTS, "warmup_s": CLOSED_LOOP_WARMUP_S}
    probes = {"count": PROBES, "warmup_s": PROBE_WARMUP_S, "requests": PROBE_REQUESTS}
    probes |= {"min_s": PROBE_MIN_S, "max_s": PROBE_MAX_S, "max_count": MAX_PROBES}
    # every failed probe is run again once before it counts (benchmarks/capacity_search.py)
    probes |= {"failures_confirmed": True}
    return {
        "command": " ".join([Path(PY).name, "benchmarks/overload.py", *argv]),
        "commit": commit(ROOT),
        "uncommitted_changes": _dirty(),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "packages": _versions(),
        "configs": {w.name: (ROOT / w.config).read_text(encoding="utf-8") for w in workloads},
        "slo_ms": {w.name: w.slo_ms for w in workloads},
        "timing": {
            **timing,
            "client_timeout_s": CLIENT_TIMEOUT_S,
            "closed_loop": {**closed, "duration_s": CLOSED_LOOP_S},
            "probes": {**probes, "pass_share": PROBE_PASS},
        },
    }


def _floats(parser: argparse.ArgumentParser, flag: str, text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(m) for m in text.split(",") if m)
    except ValueError:
        parser.error(f"{flag} must be numbers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        parser.error(f"{flag} must be positive numbers, got {text!r}")
    return values


def _names(parser: argparse.ArgumentParser, flag: str, text: str, known: list[str]) -> list[str]:
    names = [n for n in text.split(",") if n]
    for name in names:
        if name not in known:
            parser.error(f"{flag}: unknown {name!r}; known: {', '.join(known)}")
    if not names:
        parser.error(f"{flag}: name at least one of {', '.join(known)}")
    return names


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (medians)")
    parser.add_argument("--duration-s", type=float, default=8.0, help="measured seconds a cell")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="warm-up seconds a cell")
    parser.add_argument("--after-s", type=float, default=10.0, help="idle seconds after, for RSS")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of: {', '.join(KINDS)}")
    parser.add_argument(
        "--multiples", default=",".join(f"{m:g}" for m in MULTIPLES), help="x capacity"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--docs", type=Path, help="rewrite the overload tables in this file")
    parser.add_argument(
        "--records",
        type=Path,
        help="keep each adapter's request records in this folder (WORKLOAD-KIND-rREPEAT.jsonl, "
        "for benchmarks/late_admitted.py --split-gap; they cost the adapter a little CPU)",
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        help="only derive the shares again and re-render the tables from this JSON (with --json, "
        "write the derived JSON there)",
    )
    args = parser.parse_args(argv)
    if args.from_json is not None:
        if args.docs is None:
            parser.error("--from-json needs --docs")
        result = json.loads(args.from_json.read_text(encoding="utf-8"))
        for workload in result["workloads"].values():
            summarize(workload)  # the shares and bounds derived again, by today's arithmetic
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        write_docs(args.docs, result)
        return 0
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    multiples = _floats(parser, "--multiples", args.multiples)
    kinds = tuple(_names(parser, "--kinds", args.kinds, list(KINDS)))
    names = _names(parser, "--workloads", args.workloads, list(WORKLOADS))
    workloads = [WORKLOADS[n] for n in names]
    timing = {"warmup_s": args.warmup_s, "duration_s": args.duration_s, "after_s": args.after_s}
    estimate = estimate_s(workloads, len(kinds), len(multiples), args.repeat, timing)
    shape = f"{len(workloads)} workloads x {len(kinds)} kinds x {len(multiples)} multiples"
    print(f"overload: about {estimate / 60:.0f} minutes ({shape} x {args.repeat})", flush=True)
    began = time.monotonic()
    if args.records is not None:
        args.records.mkdir(parents=True, exist_ok=True)
    result = measure(workloads, kinds, multiples, args.repeat, timing, args.records)
    result["meta"] = meta(argv, workloads, timing)
    result["meta"]["elapsed_s"] = round(time.monotonic() - began)
    result["meta"]["estimated_s"] = round(estimate)
    for name, workload in result["workloads"].items():
        print(f"\n{name} (SLO {workload['slo_ms']:g} ms):\n{table(workload)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.docs:
        write_docs(args.docs, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
