"""Overload, before and after: this revision against an earlier one at the same offered rates.

Run: ``make bench-overload-ab`` (``.venv/bin/python benchmarks/overload_ab.py --baseline
a19949d --repeat 3 --json docs/results/overload_ab.json --docs docs/reliability.md``; about 20
minutes).

The overload table (``benchmarks/overload.py``) states each cell as a multiple of the capacity
the revision itself measured, and that capacity moves with the revision and with the machine (on
this two-core VM the same code measured 3,500 and 11,000 req/s an hour apart). So a change can
read worse in that table while serving more at every rate. This benchmark holds the offered load
fixed: ``slackwise serve -c experiments/overload/NAME.yaml`` (``--workload``: digits by
default, or embed, as ``benchmarks/overload.py`` runs them) from each revision's tree (the
baseline checked out with ``git worktree`` into a temporary folder, run with this venv), the
same open-loop Poisson generator (this revision's ``benchmarks/loadgen.py``: keep-alive clients,
or a new connection per request with ``--fresh-connections``) pinned to a CPU of its own and the
adapter with its replicas to the others, as in ``benchmarks/overload.py`` (``--rates`` sets the
rates; ``--name`` the docs block), each rate for 10 s after 2 s of warm-up, the revisions
interleaved within each repeat. Reported: goodput (answers within the workload's SLO per second,
from when each request left the client), answers, refusals, the adapter's CPU (cores, from its
own process's CPU time over the measured seconds), the rate on the wire, the share of answers
within the SLO and the refusals' P99, as medians over the repeats with ranges.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
from overload_report import fit_costs
from overload_setup import WORKLOADS, Layout, Workload, config_with_records, taskset

from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
#: digits' default rates (req/s); another workload names its own (``--rates``)
RATES = (2000.0, 4000.0, 6000.0, 9000.0, 12000.0, 16000.0)
#: the door's counters a cell records (differences over its window; what the revision has)
DOOR_COUNTS = ("admitted_finished", "admitted_late", "admitted_overran", "refused",
               "refused_with_free_slot")  # fmt: skip


def _start(
    tree: Path, layout: Layout, workload: Workload, records: Path | None = None
) -> subprocess.Popen[bytes]:
    from functions.samples import sample_request

    env = dict(os.environ, PYTHONPATH=str(tree))
    config = workload.config
    if records is not None:
        config = str(config_with_records(tree, workload, records))
    proc = subprocess.Popen(
        [*taskset(layout.adapter), PY, "-m", "slackwise_cli.main", "serve", "-c", config],
        cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    body = sample_request(workload.sample_model, 1)
    deadline = time.monotonic() + max(120.0, 5 * workload.startup_s)
    while time.monotonic() < deadline:
        try:
            healthy = httpx.get(f"{workload.base()}/healthz", timeout=1).status_code == 200
            if healthy and httpx.post(workload.predict_url(), json=body, timeout=30).is_success:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"overload_ab: the adapter of {tree} did not come up at {workload.base()}")


def _door(workload: Workload) -> dict[str, float]:
    """The door's numbers in the function's status (the keys a revision has; none without)."""
    try:
        doc = httpx.get(workload.status_urls()[0], timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}
    door = doc.get("door") or {}
    return {k: v for k, v in door.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _cell(
    tree: Path,
    rate: float,
    layout: Layout,
    workload: Workload,
    fresh: bool = False,
    records: Path | None = None,
) -> dict[str, Any]:
    proc = _start(tree, layout, workload, records)
    try:
        adapter = psutil.Process(proc.pid)
        gen = subprocess.Popen(
            [*taskset(layout.generator), PY, str(ROOT / "benchmarks" / "loadgen.py"),
             "--url", workload.predict_url(), "--model", workload.sample_model,
             "--rate", f"{rate:.1f}", "--warmup-s", "2", "--duration-s", "10",
             "--slo-ms", f"{workload.slo_ms:g}",
             *(["--fresh-connections", "--max-in-flight", "8192"] if fresh else [])],
            stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        assert gen.stdout is not None
        for line in gen.stdout:
            if line.strip() == "measuring":
                break
        before, start, door_before = adapter.cpu_times(), time.monotonic(), _door(workload)
        time.sleep(9.5)
        after, end = adapter.cpu_times(), time.monotonic()
        out = json.loads(gen.stdout.read().strip().splitlines()[-1])
        gen.wait()
        door_after = _door(workload)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    busy = (after.user + after.system) - (before.user + before.system)
    # the door's counts from the measured window's start until every answer was in
    door = {f"door_{k}": door_after[k] - v for k, v in door_before.items() if k in door_after}
    return {
        "rate": rate,
        "goodput_rps": out["goodput_rps"],
        "ok_rps": out["ok"] / 10.0,
        "refused_rps": out["refused"] / 10.0,
        "timeouts": out["timeouts"],
        "adapter_cores": round(busy / (end - start), 3),
        "mean_batch": out["mean_batch"],
        "p50_ms": out["p50_ms"],
        "on_wire_rps": out["on_wire_rps"],
        "refusal_p99_ms": out["refusal_p99_ms"],
        "within_slo_share": out["ok_within_slo"] / out["ok"] if out["ok"] else None,
        "lag_p99_ms": out["lag_p99_ms"],
        **{k: int(v) for k, v in door.items() if k.removeprefix("door_") in DOOR_COUNTS},
        # how much a batch beside another slowed, as the controller judged it at the end
        "beside_slowdown": door_after.get("beside_slowdown"),
    }


def _stat(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def _fmt(stat: dict[str, float], digits: int = 0) -> str:
    m, lo, hi = stat["median"], stat["low"], stat["high"]
    if lo == hi:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def costs(runs: list[dict[str, Any]], revision: str) -> tuple[float, float, float]:
    """The adapter's CPU as ``idle + per_answer·answers/s + per_refusal·refusals/s``, fitted by
    least squares over a revision's cells (``overload_report.fit_costs`` over one-second
    windows): (idle cores, µs per answer, µs per refusal), NaN where not identified."""
    cells = [c for c in runs if c["revision"] == revision]
    fit = fit_costs([(1.0, c["ok_rps"], c["refused_rps"], c["adapter_cores"]) for c in cells])
    values = (fit.base_cores, fit.answer_us, fit.refusal_us)
    idle, answer, refusal = (math.nan if v is None else v for v in values)
    return idle, answer, refusal


def table(result: dict[str, Any]) -> str:
    base, head = result["meta"]["baseline"], result["meta"]["commit"]
    # runs before the generator was pinned recorded only the first five columns
    full = all("refusal_p99_ms" in row["this"] for row in result["summary"])
    heads = [f"goodput {base}", f"goodput {head}", f"answered {base} / {head}",
             f"refused {base} / {head}", f"adapter cores {base} / {head}"]  # fmt: skip
    if full:
        heads += [f"on the wire {base} / {head}", f"answers in SLO % {base} / {head}",
                  f"refusal P99 ms {base} / {head}"]  # fmt: skip
    door = all("door_refused" in row["this"] and "door_refused" in row["baseline"]
               for row in result["summary"])  # fmt: skip
    if door:
        heads += [f"door: refused with a slot free {base} / {head}",
                  f"door: admitted late {base} / {head}"]  # fmt: skip
    lines = [
        "| offered req/s | " + " | ".join(heads) + " |",
        "|" + " --- |" * (len(heads) + 1),
    ]

    def pair(b: dict[str, Any], n: dict[str, Any], key: str, digits: int = 0) -> str:
        return " / ".join(_fmt(x[key], digits) if key in x else "-" for x in (b, n))

    for row in result["summary"]:
        b, n = row["baseline"], row["this"]
        cells = [_fmt(b["goodput_rps"]), _fmt(n["goodput_rps"]), pair(b, n, "ok_rps"),
                 pair(b, n, "refused_rps"), pair(b, n, "adapter_cores", 2)]  # fmt: skip
        if full:
            share = {k: {"within_slo_share": {q: 100 * v for q, v in x["within_slo_share"].items()}}
                     for k, x in (("b", b), ("n", n)) if "within_slo_share" in x}  # fmt: skip
            cells += [pair(b, n, "on_wire_rps"),
                      pair(share.get("b", {}), share.get("n", {}), "within_slo_share", 1),
                      pair(b, n, "refusal_p99_ms")]  # fmt: skip
        if door:
            cells += [pair(b, n, "door_refused_with_free_slot"), pair(b, n, "door_admitted_late")]
        lines.append(f"| {row['rate']:.0f} | " + " | ".join(cells) + " |")
    lines.append("")
    for label, name in (("baseline", base), ("this", head)):
        idle, answer, refusal = costs(result["runs"], label)
        lines.append(
            f"- {name}: the adapter's CPU fits {idle:.2f} cores + {answer:.0f} µs per answer + "
            f"{refusal:.0f} µs per refusal (least squares over its cells)."
        )
    if "clients" in result["meta"]:
        lines.append(f"- Clients: {result['meta']['clients']}.")
    if "layout" in result["meta"]:
        where = result["meta"]["layout"]
        lines.append(
            f"- CPUs: the generator on {where['load_generator']}, the adapter and its replicas "
            f"on {where['adapter_and_replicas']}."
        )
    return "\n".join(lines)


def markers(name: str = "") -> tuple[str, str]:
    """The docs block a comparison is written into (the unnamed one is the first)."""
    tag = f" {name}" if name else ""
    return (
        f"<!-- overload before/after table{tag}: benchmarks/overload_ab.py -->",
        f"<!-- end overload before/after table{tag} -->",
    )


def summarize(runs: list[dict[str, Any]], rates: tuple[float, ...]) -> list[dict[str, Any]]:
    """Medians with ranges of each rate's cells, per revision."""
    summary: list[dict[str, Any]] = []
    for rate in rates:
        row: dict[str, Any] = {"rate": rate}
        for label in ("baseline", "this"):
            cells = [c for c in runs if c["rate"] == rate and c["revision"] == label]
            keys = ("goodput_rps", "ok_rps", "refused_rps", "adapter_cores", "on_wire_rps",
                    "refusal_p99_ms", "within_slo_share",
                    *(f"door_{k}" for k in DOOR_COUNTS))  # fmt: skip
            row[label] = {
                key: _stat(values)
                for key in keys
                if (values := [float(c[key]) for c in cells if c.get(key) is not None])
            }
        summary.append(row)
    return summary


def _rates(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[float, ...]:
    """The offered rates asked for (digits has defaults; another workload must name them)."""
    if args.rates is None and args.workload != "digits":
        parser.error(f"--rates is required with --workload {args.workload}")
    text = args.rates or ",".join(f"{r:g}" for r in RATES)
    try:
        rates = tuple(float(r) for r in text.split(","))
    except ValueError:
        parser.error(f"--rates must be numbers separated by commas, got {args.rates!r}")
    if not rates or min(rates) <= 0:
        parser.error(f"--rates must be positive, got {args.rates!r}")
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="the earlier revision (a git rev)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--docs", type=Path, help="rewrite the before/after table in this file")
    parser.add_argument("--render", type=Path, help="only rewrite the table from this JSON")
    parser.add_argument("--rates", default=None,
                        help="offered rates, req/s, comma-separated (digits: "
                             + ",".join(f"{r:g}" for r in RATES) + ")")  # fmt: skip
    parser.add_argument("--workload", default="digits", choices=sorted(WORKLOADS),
                        help="which overload workload to serve")  # fmt: skip
    parser.add_argument("--name", default="",
                        help="the docs block to rewrite (<!-- overload before/after table NAME: "
                             "...): several comparisons can live in one file")  # fmt: skip
    parser.add_argument("--fresh-connections", action="store_true",
                        help="a new connection for every request (else keep-alive)")  # fmt: skip
    parser.add_argument("--records", type=Path,
                        help="keep each cell's request records (adapter.records) in this folder, "
                             "as REVISION-RATE-rREPEAT.jsonl, for benchmarks/late_admitted.py "
                             "(they cost the adapter a little CPU: a diagnosis, not a goodput "
                             "measurement)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.render is not None:
        if args.docs is None:
            parser.error("--render needs --docs")
        _write_docs(args.docs, json.loads(args.render.read_text(encoding="utf-8")), args.name)
        return 0
    workload, rates = WORKLOADS[args.workload], _rates(parser, args)
    layout = Layout.split()
    layout.pin_self()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.baseline is None:
        parser.error("--baseline is required (the revision to compare with)")
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
            for r in range(args.repeat):
                for rate in rates:
                    for label, where in (("baseline", tree), ("this", ROOT)):
                        records = _records(args.records, f"{label}-{rate:g}-r{r + 1}")
                        cell = {"repeat": r + 1, "revision": label,
                                **_cell(where, rate, layout, workload,
                                        args.fresh_connections, records)}  # fmt: skip
                        print(json.dumps(cell), flush=True)
                        runs.append(cell)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    summary = summarize(runs, rates)
    result: dict[str, Any] = {"runs": runs, "summary": summary}
    result["meta"] = {
        "command": " ".join([Path(PY).name, "benchmarks/overload_ab.py", *(argv or sys.argv[1:])]),
        "commit": commit(ROOT),
        "baseline": base.stdout.strip(),
        "machine": machine(),
        "config": workload.config,
        "workload": workload.name,
        "slo_ms": workload.slo_ms,
        "date": time.strftime("%Y-%m-%d"),
        "layout": layout.as_json(),
        "clients": "a new connection per request" if args.fresh_connections else "keep-alive",
    }
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.docs:
        _write_docs(args.docs, result, args.name)
    return 0


def _records(folder: Path | None, name: str) -> Path | None:
    """Where a cell's request records go (``--records``), emptied: the adapter appends."""
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    (path := folder / f"{name}.jsonl").unlink(missing_ok=True)
    return path


def _write_docs(path: Path, result: dict[str, Any], name: str = "") -> None:
    begin, end = markers(name)
    text = path.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"overload_ab: {path} has no {begin} ... {end} block")
    start, stop = text.index(begin) + len(begin), text.index(end)
    path.write_text(text[:start] + "\n" + table(result) + "\n" + text[stop:], encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
