"""The GPU tables in docs/gpu.md, from the files a GPU run left (no GPU needed to render them).

Run: ``.venv/bin/python benchmarks/gpu_tables.py`` (after ``benchmarks/gpu_session.sh`` on a GPU
machine and its files copied in). Reads the serving runs (``SERVING_RUNS``) and the measured
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


#: the serving runs, oldest first: each a JSON of ``benchmarks/gpu_serving.py`` (the first,
#: before ``--container-concurrency``, measured the adapter at one batch at a time only)
SERVING_RUNS = ("gpu-serving-embed-0ae96a2.json", "gpu-serving-embed-5466684.json",
                "gpu-serving-embed.json")  # fmt: skip
LEVELS = (("slackwise", "fraction"), ("slackwise-cc2", "fraction-cc2"))


def _at(run: dict[str, Any], system: str, fraction: str) -> tuple[str, str]:
    """The adapter's largest rate with its fraction, and its P95 / mean batch there."""
    if system not in run:
        return "-", "-"
    at = run[system]["at_max"] or {}
    rate = run[system]["max_rate"] or 0
    return (
        f"{rate:,.0f} ({run[fraction]})",
        f"{at.get('p95_ms', '-')} / {at.get('mean_batch', '-')}",
    )


def serving_table(docs: list[dict[str, Any]]) -> str:
    """Per repeat of every run: the in-process bound and the adapter's largest rate under the
    SLO with one batch at a time on the replica and with two."""
    slo = docs[-1]["settings"]["slo_ms"]
    lines = [
        f"{docs[-1]['machine']['gpu']}, {docs[-1]['device']}, SLO {slo:g} ms (P95); in process: "
        "the best items/s over the batch sizes whose P95 fits the SLO",
        "",
        "| commit, date | repeat | in process items/s (batch) | adapter, 1 batch at a time: "
        "req/s (of in process) | P95 ms / mean batch | adapter, 2 at a time: req/s (of in "
        "process) | P95 ms / mean batch |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    fractions: dict[str, list[float]] = {f: [] for _, f in LEVELS}
    for doc in docs:
        for i, run in enumerate(doc["runs"], start=1):
            one, one_at = _at(run, *LEVELS[0])
            two, two_at = _at(run, *LEVELS[1])
            for _, key in LEVELS:
                if run.get(key) is not None and doc is not docs[0]:
                    fractions[key].append(run[key])
            bound = run["inprocess"]
            lines.append(
                f"| {doc['commit']}, {doc['date'][:10]} | {i} "
                f"| {bound['best_items_per_s']:,.0f} (b={bound['best_batch']}) "
                f"| {one} | {one_at} | {two} | {two_at} |"
            )
    lines += [""]
    for (_, key), label in zip(LEVELS, ("one batch at a time", "two at a time"), strict=True):
        xs = sorted(fractions[key])
        if xs:
            lines.append(
                f"At {', '.join(d['commit'] for d in docs[1:])} ({len(xs)} repeats), {label}: "
                f"fraction median {statistics.median(xs):.3f} ({xs[0]}-{xs[-1]})."
            )
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
    serving = [json.loads((RESULTS / n).read_text(encoding="utf-8")) for n in SERVING_RUNS]
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
