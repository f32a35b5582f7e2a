"""The GPU tables in docs/gpu.md, from the files a GPU run left (no GPU needed to render them).

Run: ``.venv/bin/python benchmarks/gpu_tables.py`` (after ``benchmarks/gpu_session.sh`` on a GPU
machine and its files copied in). Reads ``docs/results/gpu-serving-embed.json`` and the measured
profiles under ``functions/profiles/gpu/<gpu>/``; writes ``docs/results/gpu-serving-embed.md``,
``docs/results/gpu-curve-error.json`` and ``docs/results/gpu-curve-error.md``, which
``slackwise report`` includes into docs/gpu.md.

The curve-error table sets the simulator's GPU curve for the MiniLM stages (``MiniLM-L6`` in
:mod:`simulator.gpu_profiles`: a forward pass at fp16 with random weights, no tokenizer) beside
what embed and qa measured on a real GPU, in process (``predict``: tokenizer, model, rows) and
over HTTP (what :class:`simulator.service.ServiceCurve` reads); the error is
``(simulated - measured) / measured``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from functions.profile_format import load_profile
from simulator.gpu_profiles import CURVES
from simulator.service import ServiceCurve

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
MEASURED = ROOT / "functions" / "profiles" / "gpu" / "h200"


def _range(stat: dict[str, Any], digits: int = 0) -> str:
    fmt = f"{{:,.{digits}f}}"
    if stat["median"] is None:
        return "-"
    return f"{fmt.format(stat['median'])} ({fmt.format(stat['low'])}-{fmt.format(stat['high'])})"


def serving_table(doc: dict[str, Any]) -> str:
    """Per repeat: the in-process bound, the adapter's largest rate and what it ran at."""
    slo = doc["settings"]["slo_ms"]
    half = [
        max((r["items_per_s"] for r in run["inprocess"]["batches"].values()
             if r["p95_ms"] <= slo / 2), default=None)
        for run in doc["runs"]
    ]  # fmt: skip
    lines = [
        f"{doc['machine']['gpu']}, {doc['device']}, commit {doc['commit']}, {doc['date'][:10]}, "
        f"SLO {slo:g} ms (P95), {len(doc['runs'])} repeats",
        "",
        "| repeat | in process: best items/s (P95 <= SLO) | ... (P95 <= SLO/2) | adapter: max rate "
        "| adapter / in process | P50 / P95 / P99 ms at it | mean batch |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, (run, bound_half) in enumerate(zip(doc["runs"], half, strict=True), start=1):
        at = run["slackwise"]["at_max"] or {}
        lines.append(
            f"| {i} | {run['inprocess']['best_items_per_s']:,.0f} "
            f"(b={run['inprocess']['best_batch']}) | {bound_half or 0:,.0f} "
            f"| {run['slackwise']['max_rate'] or 0:,.0f} | {run['fraction']} "
            f"| {at.get('p50_ms')} / {at.get('p95_ms')} / {at.get('p99_ms')} "
            f"| {at.get('mean_batch')} |"
        )
    s = doc["summary"]
    lines += [
        "",
        f"Median (range): in process {_range(s['inprocess_best_items_per_s'])} items/s, the "
        f"adapter {_range(s['slackwise_max_rate'])} req/s, fraction {_range(s['fraction'], 3)}.",
    ]
    return "\n".join(lines)


def curve_error() -> dict[str, Any]:
    """For embed and qa, each measured batch size: measured median (in process, HTTP), the
    simulator's MiniLM-L6 curve at that size, and the relative errors."""
    simulated = CURVES["MiniLM-L6"]
    sizes = tuple(sorted(simulated))
    curve = ServiceCurve(
        name="MiniLM-L6",
        sizes=sizes,
        medians_ms=tuple(simulated[n] for n in sizes),
        p95s_ms=tuple(simulated[n] for n in sizes),
        prior_a_ms=0.0,
        prior_b_ms=0.0,
        cold_start_s=0.0,
    )
    out: dict[str, Any] = {"simulated_curve": "MiniLM-L6", "points": {}}
    for kind in ("embed", "qa"):
        profile = load_profile(MEASURED / f"{kind}.json")
        out["gpu"] = profile.machine.gpu
        out["measured_at"] = profile.measured_at
        rows = []
        for n in profile.batch_sizes:
            sim = curve.median_ms(n)
            local = profile.inprocess[n].median
            http = profile.http[n].median if n in profile.http else None
            rows.append({
                "batch": n, "simulated_ms": round(sim, 3), "inprocess_ms": local,
                "http_ms": http, "error_vs_inprocess": round((sim - local) / local, 3),
                "error_vs_http": None if http is None else round((sim - http) / http, 3),
            })  # fmt: skip
        out["points"][kind] = rows
    errors = [abs(r["error_vs_http"]) for rs in out["points"].values() for r in rs]
    out["median_abs_error_vs_http"] = round(statistics.median(errors), 3)
    return out


def curve_table(doc: dict[str, Any]) -> str:
    lines = [
        f"Measured on {doc['gpu']} ({doc['measured_at'][:10]}); simulated: the "
        f"{doc['simulated_curve']} curve of `simulator/gpu_profiles.py`, interpolated as the "
        "simulator does.",
        "",
        "| function | batch | simulated ms | in process ms | HTTP ms | error vs in process "
        "| error vs HTTP |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, rows in doc["points"].items():
        for r in rows:
            lines.append(
                f"| {kind} | {r['batch']} | {r['simulated_ms']:.2f} | {r['inprocess_ms']:.2f} "
                f"| {r['http_ms']:.2f} | {r['error_vs_inprocess']:+.0%} "
                f"| {r['error_vs_http']:+.0%} |"
            )
    lines += ["", f"Median absolute error against HTTP: {doc['median_abs_error_vs_http']:.0%}."]
    return "\n".join(lines)


def main() -> int:
    serving = json.loads((RESULTS / "gpu-serving-embed.json").read_text(encoding="utf-8"))
    (RESULTS / "gpu-serving-embed.md").write_text(serving_table(serving) + "\n", encoding="utf-8")
    error = curve_error()
    (RESULTS / "gpu-curve-error.json").write_text(
        json.dumps(error, indent=1) + "\n", encoding="utf-8"
    )
    (RESULTS / "gpu-curve-error.md").write_text(curve_table(error) + "\n", encoding="utf-8")
    print(serving_table(serving))
    print()
    print(curve_table(error))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
