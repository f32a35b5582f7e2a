"""What an experiment measured per mode, read back from the replayer's records: the summary
table (SLO violations, percentiles, replica-seconds, batch sizes, cold starts) and, for a chain,
each stage's queueing and compute time (GrandSLAM Fig. 11)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

__all__ = [
    "ExperimentResult",
    "ModeRun",
    "ModeSummary",
    "StageTime",
    "batch_size",
    "parse_server_timing",
    "print_table",
    "stage_times",
    "summarize",
]


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
    #: batches and instances sent per function (the adapter's metrics)
    per_stage: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class StageTime:
    """One stage's mean queueing and compute time over the answered requests, in ms."""

    queue_ms: float
    compute_ms: float
    mean_batch: float
    #: the batch's round trip from the adapter (compute plus HTTP, the platform and parsing)
    upstream_ms: float = math.nan


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
    mean_ms: float = math.nan
    #: requests that arrived while their function (any stage) had no ready replica
    cold_hits: int = 0
    stages: dict[str, StageTime] = field(default_factory=dict)
    #: violations among the requests sent once the first replica was ready (the first request
    #: that did not arrive cold, and every one after it): the misses outside the first cold start
    warm_violation_pct: float = math.nan
    #: with a disturbance: misses and replica-seconds inside its window and outside it
    window: dict[str, float] | None = None
    #: one sample a second: ready and desired replicas (the count asked for, so when a scaler
    #: decided shows apart from when its replicas came up), and the adapter's queue
    timeline: list[dict[str, float]] = field(default_factory=list)


@dataclass
class ExperimentResult:
    #: the function, or for an app experiment the app
    function: str
    slo_ms: float
    trace: str
    max_rps: float
    step_s: float
    duration_s: float
    start_s: float
    seed: int
    modes: dict[str, ModeSummary] = field(default_factory=dict)
    #: the app's stages, in order (empty for a function experiment)
    stages: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["modes"] = {m: dataclasses.asdict(s) for m, s in self.modes.items()}
        doc["ran_on"] = machine()
        return doc


def machine() -> dict[str, Any]:
    """When and on what a live experiment ran: its numbers depend on both."""
    import datetime
    import os
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next(
                (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                "",
            )
    except OSError:
        model = platform.processor()
    return {
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def stage_times(
    records: list[dict[str, Any]], stages: list[str], batches: dict[str, tuple[int, int]]
) -> dict[str, StageTime]:
    """Mean queue and compute per stage, read back from the answers' ``Server-Timing``."""
    sums = {fn: [0.0, 0.0, 0.0] for fn in stages}
    answered = 0
    for r in records:
        if r["status"] != 200:
            continue
        timing = parse_server_timing(r["headers"].get("server-timing", ""))
        answered += 1
        for fn in stages:
            sums[fn][0] += timing.get(f"{fn}-queue", 0.0)
            sums[fn][1] += timing.get(f"{fn}-compute", 0.0)
            sums[fn][2] += timing.get(f"{fn}-upstream", 0.0)
    out: dict[str, StageTime] = {}
    for fn in stages:
        count, instances = batches.get(fn, (0, 0))
        out[fn] = StageTime(
            queue_ms=round(sums[fn][0] / answered, 2) if answered else math.nan,
            compute_ms=round(sums[fn][1] / answered, 2) if answered else math.nan,
            mean_batch=round(instances / count, 2) if count else 0.0,
            upstream_ms=round(sums[fn][2] / answered, 2) if answered else math.nan,
        )
    return out


def batch_size(headers: dict[str, str]) -> float:
    """A record's ``X-Batch-Size``: one size, or for a chain one per stage (their mean)."""
    raw = headers.get("x-batch-size", "1")
    try:
        sizes = [int(part) for part in raw.split(",")]
    except ValueError:
        return 1.0
    return sum(sizes) / len(sizes) if sizes else 1.0


def parse_server_timing(value: str) -> dict[str, float]:
    """``name;dur=1.5, other;dur=2`` -> ``{"name": 1.5, "other": 2.0}`` (entries without a
    duration, or with a malformed one, are left out)."""
    out: dict[str, float] = {}
    for entry in value.split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        for param in params:
            key, _, raw = param.partition("=")
            if key.strip() == "dur" and name:
                with contextlib.suppress(ValueError):
                    out[name] = float(raw)
    return out


def stage_samples(
    paths: Sequence[Path], stages: Sequence[str]
) -> dict[str, list[tuple[int, float]]]:
    """Per stage of a chain, (batch size, upstream round trip ms) of each answered request in
    the replayer's records (``--plots DIR`` keeps them as ``DIR/MODE.jsonl``), in file order:
    ``X-Batch-Size`` lists each stage's batch size, ``Server-Timing`` its ``<stage>-upstream``."""
    out: dict[str, list[tuple[int, float]]] = {s: [] for s in stages}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("status") != 200:
                continue
            headers = record.get("headers", {})
            sizes = [int(x) for x in headers.get("x-batch-size", "").split(",") if x]
            timing = parse_server_timing(headers.get("server-timing", ""))
            if len(sizes) != len(stages):
                continue
            for stage, size in zip(stages, sizes, strict=True):
                if f"{stage}-upstream" in timing:
                    out[stage].append((size, timing[f"{stage}-upstream"]))
    return out


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
        sizes = [batch_size(r["headers"]) for r in ok]
        mean_batch = sum(sizes) / len(sizes) if sizes else 0.0
    return ModeSummary(
        warm_violation_pct=_warm_violation_pct(records, slo_ms),
        cold_hits=sum(1 for r in records if r["headers"].get("x-arrived-cold") == "1"),
        mean_ms=round(float(latencies.mean()), 2) if latencies.size else math.nan,
        requests=len(records),
        errors=len(records) - len(ok),
        violation_pct=round(100.0 * violations / len(records), 3) if records else 0.0,
        p50_ms=pct(50),
        p95_ms=pct(95),
        p99_ms=pct(99),
        replica_seconds=round(float(run.usage["replica_seconds"]), 2),
        mean_batch=round(mean_batch, 2),
        cold_starts=int(run.usage["cold_starts"]),
        timeline=list(run.timeline),
    )


def _warm_violation_pct(records: list[dict[str, Any]], slo_ms: float) -> float:
    """The violation rate among the requests sent from the first answered one that did not
    arrive cold on: the first evidence of a ready replica. A refusal at the door carries no
    ``x-arrived-cold`` mark (nothing arrived anywhere), so it says nothing of a replica: counted
    from the first one instead, an early refusal in the first cold start set the boundary ahead
    of that cold start's other refusals and late answers."""
    ordered = sorted(records, key=lambda r: float(r.get("sent", 0.0)))  # stable: file order
    first = next(
        (
            i
            for i, r in enumerate(ordered)
            if r["status"] == 200 and r["headers"].get("x-arrived-cold") != "1"
        ),
        len(ordered),
    )
    warm = ordered[first:]
    if not warm:
        return math.nan
    missed = sum(1 for r in warm if r["status"] != 200 or r["latency"] * 1000.0 > slo_ms)
    return round(100.0 * missed / len(warm), 3)


def print_table(result: ExperimentResult, out: TextIO) -> None:
    out.write(
        f"\n{result.function}: SLO {result.slo_ms:g} ms per request; trace {result.trace} "
        f"(from {result.start_s:g} s, {result.duration_s:g} s, peak {result.max_rps:g} req/s, "
        f"step {result.step_s:g} s, seed {result.seed})\n"
    )
    out.write(
        f"{'mode':<17} {'requests':>8} {'errors':>6} {'viol%':>7} {'p50_ms':>8} {'p95_ms':>8} "
        f"{'p99_ms':>8} {'replica_s':>9} {'batch':>6} {'cold':>5} {'cold_hits':>9} "
        f"{'warm_viol%':>10}\n"
    )
    for mode, s in result.modes.items():
        out.write(
            f"{mode:<17} {s.requests:>8} {s.errors:>6} {s.violation_pct:>7.2f} {s.p50_ms:>8.1f} "
            f"{s.p95_ms:>8.1f} {s.p99_ms:>8.1f} {s.replica_seconds:>9.1f} {s.mean_batch:>6.2f} "
            f"{s.cold_starts:>5} {s.cold_hits:>9} {s.warm_violation_pct:>10.2f}\n"
        )
    if result.stages:
        out.write("\nper stage, mean ms: queue, upstream round trip (of which compute), batch\n")
        out.write(f"{'mode':<10} " + " ".join(f"{fn:>32}" for fn in result.stages) + "\n")
        for mode, s in result.modes.items():
            cells = []
            for fn in result.stages:
                t = s.stages.get(fn)
                cells.append(
                    f"{t.queue_ms:>8.1f} {t.upstream_ms:>7.1f} ({t.compute_ms:>5.1f}) "
                    f"b{t.mean_batch:>5.2f}"
                    if t
                    else "-"
                )
            out.write(f"{mode:<10} " + " ".join(f"{c:>32}" for c in cells) + "\n")
    out.flush()
