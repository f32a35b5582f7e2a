"""The advisor's latency models against live runs: predicted P95/P99 next to measured ones.

``benchmarks/percentile_check.py`` sets the models against the simulator, which shares the
replay's batching rule, so it cannot show what neither of them sees (the adapter's own time, the
HTTP hops, two replicas and a load generator sharing two cores). This runs the real thing:
``slackwise serve`` in front of one or two warm embed replicas (``experiments/peers/embed.yaml``:
SLO 150 ms at P95, every other value the default; min-scale = max-scale, so the count is fixed),
open-loop Poisson load at each rate from ``benchmarks/loadgen.py`` in its own process, and the
client's P95 and P99 from when each request was scheduled.

Each fixed fleet runs twice: with the adapter's defaults (it waits for company when that pays,
rule 6 of :mod:`slackwise_policies.batching`) and with ``adapter.max_wait_ms: 0`` (whatever is
queued leaves when a slot frees: the work-conserving batching the replay assumes), so the table
tells the models' error from the part of the live latency that is the policy spending slack.

Each model is then fed what the adapter saw in that same run: every answer's batch size and the
adapter's round trip to the replica (``X-Batch-Size``, ``Server-Timing: upstream``), put into the
adapter's own :class:`slackwise_policies.latency.LatencyModel` (seeded from the profile's fit, as
the adapter seeds it), and the batch limit AIMD had at the end of the run. Predicted at the run's
measured rate and fixed count:

* ``replay`` (:func:`slackwise_policies.replay.replay_percentile`, the advisor's default);
* ``batched`` (:func:`slackwise_policies.percentile.response_time_percentile`, the analytic one).

Error = (predicted - live) / live against the client's percentile, per run; the table gives
medians over ``--repeat`` runs with their ranges, and the adapter's own P95 (arrival to answer,
``Server-Timing: total``) beside the client's. Fleets run in rotated order each repeat.

    .venv/bin/python benchmarks/model_error_live.py --repeat 3 \\
        --json docs/results/model_error_live.json --docs docs/advisor.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from peer_systems import ROOT, Running, Setup, start

from simulator.profiles import resolve_curves
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine
from slackwise_policies.latency import LatencyModel
from slackwise_policies.percentile import ServiceModel, response_time_percentile
from slackwise_policies.replay import ObservedService, replay_percentile

MODEL = "embed"
SLO_MS = 150.0
PERCENTILE = 95.0
#: (replicas, offered req/s): light, middling and heavy load for the fixed fleet here
CELLS = {1: (25.0, 50.0, 75.0), 2: (50.0, 100.0, 140.0)}
#: the adapter's cap on waiting for company: its default (None), and none (work-conserving)
WAITS: tuple[float | None, ...] = (None, 0.0)
LOADGEN = str(ROOT / "benchmarks" / "loadgen.py")
BEGIN = "<!-- live model error table: benchmarks/model_error_live.py -->"
END = "<!-- end live model error table -->"


def _wait_label(wait: float | None) -> str:
    return "default" if wait is None else f"{wait:g} ms"


def observed_model(round_trips: list[tuple[int, float]]) -> LatencyModel:
    """The adapter's latency model for ``MODEL``, seeded from its profile and fed every batch of
    the run once (answers of one batch share its size and round trip; a long window keeps all)."""
    curve = resolve_curves("cpu", {MODEL: MODEL}, ROOT)[MODEL]
    model = LatencyModel.from_prior(
        max(curve.prior_a_ms, 0.1), max(curve.prior_b_ms, 0.0),
        window_s=1e9, max_samples_per_size=100_000,
    )  # fmt: skip
    for size, ms in sorted(set(round_trips)):  # one sample a batch
        model.observe(0.0, size, ms, ms, cold=False)
    return model


def predictions(
    round_trips: list[tuple[int, float]], rate: float, replicas: int, limit: int
) -> dict[str, float]:
    """Each model's P95 and P99 at ``rate`` on ``replicas``, fed the run's own batches."""
    model = observed_model(round_trips)
    observed = ObservedService.from_latency_model(
        model, 0.0, batch_limit=limit, container_concurrency=1
    )
    service = ServiceModel.from_latency_model(
        model, 0.0, batch_limit=limit, container_concurrency=1
    )
    out: dict[str, float] = {}
    for q in (95, 99):
        out[f"replay_p{q}_ms"] = replay_percentile(rate, replicas, observed, SLO_MS, float(q))
        out[f"batched_p{q}_ms"] = response_time_percentile(rate, replicas, service, float(q))
    return {k: round(v, 2) for k, v in out.items()}


def _limit(running: Running) -> int:
    url = running.url.removesuffix(":predict")
    with httpx.Client(trust_env=False, timeout=5) as client:
        return int(client.get(url).json()["aimd_limit"])


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * int(q) // 100) - 1)]


def _cell(running: Running, replicas: int, rate: float, seed: int, probe: tuple[float, float]
          ) -> dict[str, Any]:  # fmt: skip
    warmup_s, duration_s = probe
    cmd = [sys.executable, LOADGEN, "--url", running.url, "--model", MODEL, "--rate", f"{rate:g}",
           "--warmup-s", f"{warmup_s:g}", "--duration-s", f"{duration_s:g}", "--seed", str(seed),
           "--slo-ms", f"{SLO_MS:g}", "--timings"]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    timings = result.pop("timings")
    trips = [(int(n), float(up)) for n, _, up, _ in timings]
    totals = [float(t) for *_, t in timings]
    outside = [float(t) - float(q) - float(up) for _, q, up, t in timings]
    limit = _limit(running)
    measured_rate = result["requests"] / duration_s
    cell = {
        "replicas": replicas, "rate": rate, "measured_rate": round(measured_rate, 1),
        "aimd_limit": limit, "batches": len(set(trips)),
        "adapter_p95_ms": round(_nearest_rank(totals, 95), 2),
        "adapter_p99_ms": round(_nearest_rank(totals, 99), 2),
        "queue_mean_ms": round(statistics.mean(float(q) for _, q, _, _ in timings), 2),
        "outside_p95_ms": round(_nearest_rank(outside, 95), 2),
        **{k: result[k] for k in ("p50_ms", "p95_ms", "p99_ms", "mean_batch", "error_ratio",
                                  "client_dropped", "lag_p99_ms")},
        **predictions(trips, measured_rate, replicas, limit),
    }  # fmt: skip
    for name in ("replay", "batched"):
        for q in (95, 99):
            live = cell[f"p{q}_ms"]
            cell[f"{name}_p{q}_err_pct"] = round(100.0 * (cell[f"{name}_p{q}_ms"] - live) / live, 1)
    return cell


def measure(repeat: int, probe: tuple[float, float], out_dir: Path) -> list[dict[str, Any]]:
    """Every cell, ``repeat`` times, the fleets (replicas x wait cap) in rotated order."""
    fleets = [(w, n) for w in WAITS for n in CELLS]
    runs: list[dict[str, Any]] = []
    for r in range(repeat):
        k = r % len(fleets)
        for wait, replicas in fleets[k:] + fleets[:k]:
            settings: tuple[tuple[str, Any], ...] = (("replicas", replicas),)
            if wait is not None:
                settings += (("max_wait_ms", wait),)
            with start(Setup("slackwise", settings), MODEL, out_dir, ROOT / ".bench") as running:
                for rate in CELLS[replicas]:
                    cell = {"repeat": r + 1, "wait": _wait_label(wait),
                            **_cell(running, replicas, rate, r + 1, probe)}  # fmt: skip
                    print(json.dumps(cell), flush=True)
                    runs.append(cell)
    return runs


def _stat(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


SUMMARY_KEYS = ("measured_rate", "mean_batch", "p95_ms", "adapter_p95_ms", "replay_p95_ms",
                "replay_p95_err_pct", "batched_p95_ms", "batched_p95_err_pct", "p99_ms",
                "replay_p99_ms", "replay_p99_err_pct", "batched_p99_ms", "batched_p99_err_pct",
                "queue_mean_ms", "outside_p95_ms")  # fmt: skip


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for wait in map(_wait_label, WAITS):
        for replicas, rates in CELLS.items():
            for rate in rates:
                cells = [
                    c
                    for c in runs
                    if c["wait"] == wait and c["replicas"] == replicas and c["rate"] == rate
                ]
                if cells:
                    rows.append(
                        {
                            "wait": wait,
                            "replicas": replicas,
                            "rate": rate,
                            **{k: _stat([float(c[k]) for c in cells]) for k in SUMMARY_KEYS},
                        }
                    )
    return rows


def _fmt(stat: dict[str, float], signed: bool = False) -> str:
    f = "{:+.0f}" if signed else "{:.1f}"
    return f"{f.format(stat['median'])} ({f.format(stat['low'])}..{f.format(stat['high'])})"


def _model(r: dict[str, Any], name: str, q: int) -> str:
    return f"{r[f'{name}_p{q}_ms']['median']:.1f} ({_fmt(r[f'{name}_p{q}_err_pct'], True)})"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| wait cap | replicas | req/s | mean batch | live P95 (adapter's) | replay P95 "
            "(err %) | batched P95 (err %) | live P99 | replay P99 (err %) | batched P99 (err %) "
            "| mean queue | outside P95 |")  # fmt: skip
    lines = [head, "|" + " --- |" * 12]
    for r in rows:
        lines.append(
            f"| {r['wait']} | {r['replicas']} | {r['measured_rate']['median']:.0f} "
            f"| {r['mean_batch']['median']:.1f} "
            f"| {_fmt(r['p95_ms'])} ({r['adapter_p95_ms']['median']:.1f}) "
            f"| {_model(r, 'replay', 95)} | {_model(r, 'batched', 95)} | {_fmt(r['p99_ms'])} "
            f"| {_model(r, 'replay', 99)} | {_model(r, 'batched', 99)} "
            f"| {r['queue_mean_ms']['median']:.1f} | {r['outside_p95_ms']['median']:.1f} |"
        )
    return "\n".join(lines)


def mean_abs(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.mean(abs(r[key]["median"]) for r in rows))


def signed_mean(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.mean(r[key]["median"] for r in rows))


def write_docs(path: Path, rows: list[dict[str, Any]]) -> None:
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path} has no {BEGIN!r} ... {END!r} block to fill")
    lines = [table(rows), ""]
    for wait in map(_wait_label, WAITS):
        some = [r for r in rows if r["wait"] == wait]
        for name in ("replay", "batched"):
            if some:
                lines.append(
                    f"- wait cap {wait}, {name}: mean |error| of the medians "
                    f"{mean_abs(some, f'{name}_p95_err_pct'):.0f} % at P95 (signed "
                    f"{signed_mean(some, f'{name}_p95_err_pct'):+.0f} %), "
                    f"{mean_abs(some, f'{name}_p99_err_pct'):.0f} % at P99 (signed "
                    f"{signed_mean(some, f'{name}_p99_err_pct'):+.0f} %)."
                )
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + rest.split(END, 1)[1],
                    encoding="utf-8")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--docs", type=Path, help="a markdown file with the table's markers")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.duration_s <= 0 or args.warmup_s < 0:
        parser.error("--duration-s must be > 0 and --warmup-s >= 0")
    if args.docs is not None and BEGIN not in (
        args.docs.read_text(encoding="utf-8") if args.docs.is_file() else ""
    ):
        parser.error(f"--docs {args.docs}: no {BEGIN!r} block in it to fill")
    with tempfile.TemporaryDirectory() as tmp:
        runs = measure(args.repeat, (args.warmup_s, args.duration_s), Path(tmp))
    rows = summarize(runs)
    print(table(rows))
    result = {"runs": runs, "summary": rows, "meta": {
        "command": " ".join(["python", "benchmarks/model_error_live.py", *(argv or sys.argv[1:])]),
        "commit": commit(ROOT), "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "setup": f"slackwise serve, experiments/peers/{MODEL}.yaml with min = max = replicas",
        "slo_ms": SLO_MS, "percentile": PERCENTILE,
        "probe": {"warmup_s": args.warmup_s, "duration_s": args.duration_s},
    }}  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.docs:
        write_docs(args.docs, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
