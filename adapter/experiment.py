"""``slackwise experiment``: one trace replayed through each mode, on a fresh platform each time.

Modes: ``direct`` (straight to the function through the platform's activator: Knative alone),
``mlproxy`` (the adapter with MLProxy's published policy) and ``slackwise`` (the full adapter).
For each mode the local platform starts from scratch, the adapter (if any) starts in front of it,
and the open-loop replayer runs in a separate process (so the load generator does not share the
adapter's core) and records every request. The result per mode: requests, errors, SLO violation
percentage, latency percentiles, replica-seconds, mean batch size and cold starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from adapter.app import create_app
from adapter.config import Config, ExperimentConfig
from adapter.platform_view import LocalView
from knative.gateway import serve_in_loop
from knative.local import LocalPlatform

logger = logging.getLogger(__name__)


@dataclass
class ModeRun:
    """What one mode's run produced."""

    mode: str
    records: list[dict[str, Any]]
    usage: dict[str, float | int]
    timeline: list[dict[str, float]]
    batches: int = 0
    instances_sent: int = 0
    wall_s: float = 0.0


@dataclass(frozen=True)
class ModeSummary:
    requests: int
    errors: int
    violation_pct: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    replica_seconds: float
    mean_batch: float
    cold_starts: int


@dataclass
class ExperimentResult:
    function: str
    slo_ms: float
    trace: str
    max_rps: float
    step_s: float
    duration_s: float
    start_s: float
    seed: int
    modes: dict[str, ModeSummary] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["modes"] = {m: dataclasses.asdict(s) for m, s in self.modes.items()}
        return doc


def summarize(run: ModeRun, slo_ms: float) -> ModeSummary:
    """Per-request SLO accounting: an error or an answer later than the SLO is a violation."""
    records = run.records
    ok = [r for r in records if r["status"] == 200]
    latencies = np.array([r["latency"] * 1000.0 for r in ok]) if ok else np.array([])
    violations = sum(1 for r in records if r["status"] != 200 or r["latency"] * 1000.0 > slo_ms)

    def pct(q: float) -> float:
        return round(float(np.percentile(latencies, q)), 2) if latencies.size else math.nan

    if run.batches:
        mean_batch = run.instances_sent / run.batches
    else:  # direct: every request is its own batch
        sizes = [int(r["headers"].get("x-batch-size", 1)) for r in ok]
        mean_batch = sum(sizes) / len(sizes) if sizes else 0.0
    return ModeSummary(
        requests=len(records),
        errors=len(records) - len(ok),
        violation_pct=round(100.0 * violations / len(records), 3) if records else 0.0,
        p50_ms=pct(50),
        p95_ms=pct(95),
        p99_ms=pct(99),
        replica_seconds=round(float(run.usage["replica_seconds"]), 2),
        mean_batch=round(mean_batch, 2),
        cold_starts=int(run.usage["cold_starts"]),
    )


def _replay_command(exp: ExperimentConfig, model: str, url: str, records: Path) -> list[str]:
    return [
        sys.executable, "-m", "loadtests.replay",
        "--trace", exp.trace,
        "--start-s", f"{exp.start_s:g}",
        "--duration-s", f"{exp.duration_s:g}",
        "--max-rps", f"{exp.max_rps:g}",
        "--step-s", f"{exp.step_s:g}",
        "--seed", str(exp.seed),
        "--target", url,
        "--function", exp.function,
        "--model", model,
        "--records", str(records),
        "--progress-s", "10",
    ]  # fmt: skip


async def _sample(
    platform: LocalPlatform, function: str, app_state: Any, into: list[dict[str, float]]
) -> None:
    start = time.monotonic()
    while True:
        counts = platform.replicas(function)
        row = {"t": round(time.monotonic() - start, 2), "ready": counts.ready,
               "desired": counts.desired}  # fmt: skip
        if app_state is not None:
            d = app_state.dispatchers[function]
            row["queue"] = len(d.queue)
            row["aimd_limit"] = d.aimd.limit
        into.append(row)
        await asyncio.sleep(1.0)


async def run_mode(config: Config, exp: ExperimentConfig, mode: str, workdir: Path) -> ModeRun:
    """One mode on a fresh platform; the replayer runs as its own process."""
    fn = config.functions[exp.function]
    records_path = workdir / f"{mode}.jsonl"
    timeline: list[dict[str, float]] = []
    started = time.monotonic()
    async with LocalPlatform(config) as platform:
        server = server_task = None
        app_state = None
        if mode == "direct":
            target = platform.url(exp.function)
        else:
            app = create_app(config, view=LocalView(platform), mode=mode)
            server, server_task, port = await serve_in_loop(app, config.platform.host, 0)
            app_state = app.state.adapter
            target = f"http://{config.platform.host}:{port}"
        sampler = asyncio.create_task(_sample(platform, exp.function, app_state, timeline))
        try:
            proc = await asyncio.create_subprocess_exec(
                *_replay_command(exp, fn.model, target, records_path)
            )
            code = await proc.wait()
            if code != 0:
                raise RuntimeError(f"{mode}: the replayer exited with code {code}")
        finally:
            sampler.cancel()
            usage = platform.usage(exp.function)
            batches = instances = 0
            if app_state is not None:
                dispatcher = app_state.dispatchers[exp.function]
                batches, instances = dispatcher.batches, dispatcher.instances_sent
            if server is not None and server_task is not None:
                server.should_exit = True
                await server_task
    with records_path.open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return ModeRun(
        mode=mode,
        records=records,
        usage=usage,
        timeline=timeline,
        batches=batches,
        instances_sent=instances,
        wall_s=time.monotonic() - started,
    )


def print_table(result: ExperimentResult, out: TextIO) -> None:
    out.write(
        f"\n{result.function}: SLO {result.slo_ms:g} ms per request; trace {result.trace} "
        f"(from {result.start_s:g} s, {result.duration_s:g} s, peak {result.max_rps:g} req/s, "
        f"step {result.step_s:g} s, seed {result.seed})\n"
    )
    out.write(
        f"{'mode':<10} {'requests':>8} {'errors':>6} {'viol%':>7} {'p50_ms':>8} {'p95_ms':>8} "
        f"{'p99_ms':>8} {'replica_s':>9} {'batch':>6} {'cold':>5}\n"
    )
    for mode, s in result.modes.items():
        out.write(
            f"{mode:<10} {s.requests:>8} {s.errors:>6} {s.violation_pct:>7.2f} {s.p50_ms:>8.1f} "
            f"{s.p95_ms:>8.1f} {s.p99_ms:>8.1f} {s.replica_seconds:>9.1f} {s.mean_batch:>6.2f} "
            f"{s.cold_starts:>5}\n"
        )
    out.flush()


async def run_experiment(
    config: Config,
    exp: ExperimentConfig,
    *,
    out: TextIO,
    plots_dir: Path | None = None,
) -> tuple[ExperimentResult, dict[str, ModeRun]]:
    """Every mode of ``exp`` in turn; prints the table.

    With ``plots_dir`` it also draws the plots there and keeps each mode's request records
    (``MODE.jsonl``, one JSON line per request, as the replayer wrote them).
    """
    slo = config.slo_ms(exp.function)
    if slo is None:
        raise ValueError(f"function {exp.function!r} has no SLO (functions.X.slo_ms or an app)")
    result = ExperimentResult(
        function=exp.function, slo_ms=slo, trace=exp.trace, max_rps=exp.max_rps,
        step_s=exp.step_s, duration_s=exp.duration_s, start_s=exp.start_s, seed=exp.seed,
    )  # fmt: skip
    runs: dict[str, ModeRun] = {}
    with tempfile.TemporaryDirectory(prefix="slackwise-exp-") as tmp:
        workdir = Path(tmp) if plots_dir is None else plots_dir
        workdir.mkdir(parents=True, exist_ok=True)
        for mode in exp.modes:
            out.write(f"--- {mode}: replaying {exp.trace} against {exp.function}\n")
            out.flush()
            run = await run_mode(config, exp, mode, workdir)
            runs[mode] = run
            result.modes[mode] = summarize(run, slo)
            s = result.modes[mode]
            out.write(
                f"    {s.requests} requests, {s.violation_pct:.2f}% over SLO, p99 "
                f"{s.p99_ms:.1f} ms, {s.replica_seconds:.1f} replica-s, {run.wall_s:.0f} s\n"
            )
            await asyncio.sleep(exp.settle_s)
    print_table(result, out)
    if plots_dir is not None:
        from adapter.plots import plot_experiment

        for path in plot_experiment(result, runs, plots_dir):
            out.write(f"plot: {path}\n")
    return result, runs
