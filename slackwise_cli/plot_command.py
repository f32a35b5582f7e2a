"""``slackwise plot``: the figures of a load test run outside ``slackwise experiment``: the
replayer's records (``slackwise replay --records R.jsonl``), the locustfile's (``locust ...
--slackwise-records R.jsonl``, the same format), or Locust's CSV history (``locust ... --csv
PREFIX --csv-full-history``: ``PREFIX_stats_history.csv``).

``latency.png``: per window, the P95 latency with the SLO line, the share of requests that
missed it (failed or slower; Locust's failures, which the locustfile counts SLO misses as), and
the rate of requests. From records the P95 is over the same windows as the misses. Locust's CSV
has no requests, only its percentiles: over its last 10 s with ``--csv-full-history`` (a P95
that lags the miss panel by up to 10 s), else since the start of the run (cumulative: it says
nothing of a window and is drawn dotted, labelled so). The latency axis is logarithmic only
where the values span more than a factor of 20. ``ccdf.png`` (records only: Locust's CSV keeps
no per-request latencies): the latency CCDF with the SLO marked. One line per input file,
labelled by its name. The replica count is not in either input; ``slackwise experiment
--plots`` draws it from the platform.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from slackwise_cli.plots import ccdf_axes

__all__ = ["Series", "add_arguments", "from_locust", "from_records", "run"]


@dataclass
class Series:
    """One run's windows: start times (s from its start), P95 (ms), misses (%), rate (req/s),
    and, from records, every answered request's latency (ms) for the CCDF."""

    label: str
    t: list[float] = field(default_factory=list)
    p95: list[float] = field(default_factory=list)
    miss: list[float] = field(default_factory=list)
    rate: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    #: what the P95 is taken over
    p95_over: str = ""
    #: the P95 is cumulative since the start (Locust's CSV without its full history)
    cumulative: bool = False


def from_records(path: Path, slo_ms: float, window_s: float) -> Series:
    """The replayer's JSONL records (``sent``, ``latency`` in s, ``status``) in windows."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            rows.append((float(r["sent"]), float(r["latency"]) * 1000.0, int(r["status"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a replay record ({exc})") from None
    series = Series(path.stem, p95_over=f"{window_s:g} s windows")
    if not rows:
        return series
    end = max(t for t, _, _ in rows)
    for lo in np.arange(0.0, end + window_s, window_s):
        inside = [(ms, status) for t, ms, status in rows if lo <= t < lo + window_s]
        if not inside:
            continue
        ok = [ms for ms, status in inside if status == 200]
        missed = sum(1 for ms, status in inside if status != 200 or ms > slo_ms)
        series.t.append(float(lo))
        series.p95.append(float(np.percentile(ok, 95)) if ok else math.nan)
        series.miss.append(100.0 * missed / len(inside))
        series.rate.append(len(inside) / window_s)
    series.latencies = sorted(ms for _, ms, status in rows if status == 200)
    return series


def from_locust(path: Path) -> Series:
    """Locust's ``*_stats_history.csv``: its ``Aggregated`` rows, one a second; a history with
    rows for each request name too is a full history, whose percentiles are over Locust's last
    10 s (else they are cumulative since the start)."""
    series = Series(path.name.removesuffix("_stats_history.csv"))
    full = False
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        needed = {"Timestamp", "Name", "Requests/s", "Failures/s", "95%"}
        if reader.fieldnames is None or not needed <= set(reader.fieldnames):
            raise ValueError(f"{path}: not a Locust stats history (columns {sorted(needed)})")
        start: float | None = None
        for row in reader:
            if row["Name"] != "Aggregated":
                full = True
                continue
            t = float(row["Timestamp"])
            start = t if start is None else start
            rps, fails = float(row["Requests/s"]), float(row["Failures/s"])
            p95 = row["95%"]
            series.t.append(t - start)
            series.p95.append(float(p95) if p95 not in ("N/A", "") else math.nan)
            series.rate.append(rps)
            series.miss.append(100.0 * fails / rps if rps > 0 else math.nan)
    series.cumulative = not full
    series.p95_over = "Locust's last 10 s" if full else "the whole run so far (Locust's cumulative)"
    return series


def latency_scale(values: list[float]) -> str:
    """``log`` where the latencies span more than a factor of 20, else ``linear``."""
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    if not finite or max(finite) <= 20 * min(finite):
        return "linear"
    return "log"


def draw(runs: list[Series], slo_ms: float, out: Path) -> list[Path]:
    """``latency.png`` and, when a run has latencies, ``ccdf.png`` into ``out``."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for s in runs:
        style = ":" if s.cumulative else "-"
        # each value holds over its window: drawn as steps from the window's start
        axes[0].step(s.t, s.p95, style, where="post", label=f"{s.label} (P95 over {s.p95_over})")
        axes[1].step(s.t, s.miss, where="post", label=s.label)
        axes[2].step(s.t, s.rate, where="post", label=s.label)
    axes[0].axhline(slo_ms, color="black", linestyle="--", linewidth=1, label="SLO")
    axes[0].set_ylabel("P95 latency (ms)")
    axes[0].set_yscale(latency_scale([v for s in runs for v in s.p95] + [slo_ms]))
    if axes[0].get_yscale() == "log":  # plain numbers at the ticks, not 3 x 10^2
        axes[0].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axes[0].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[1].set_ylabel("SLO misses (%)")
    axes[2].set_ylabel("requests per second")
    axes[2].set_xlabel("time (s)")
    axes[0].legend(loc="upper right")
    fig.tight_layout()
    paths = [out / "latency.png"]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)
    with_latency = [s for s in runs if s.latencies]
    if with_latency:
        fig, ax = plt.subplots(figsize=(7, 5))
        ccdf_axes(ax, {s.label: s.latencies for s in with_latency}, slo_ms)
        fig.tight_layout()
        paths.append(out / "ccdf.png")
        fig.savefig(paths[1], dpi=110)
        plt.close(fig)
    return paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = "replay records (.jsonl) or Locust *_stats_history.csv files"
    parser.add_argument("inputs", nargs="+", type=Path, help=what)
    parser.add_argument("--slo-ms", type=float, required=True, help="the SLO line and misses")
    parser.add_argument("--out", type=Path, required=True, help="directory for the figures")
    parser.add_argument("--window-s", type=float, default=5.0, help="window of the records")


def run(args: argparse.Namespace) -> int:
    """Read every input, draw, say where; a one-line error for a bad input."""
    if not (args.slo_ms > 0 and args.window_s > 0):
        raise SystemExit("slackwise plot: --slo-ms and --window-s must be positive")
    runs = []
    for path in args.inputs:
        try:
            if path.suffix == ".csv":
                runs.append(from_locust(path))
            else:
                runs.append(from_records(path, args.slo_ms, args.window_s))
        except OSError as exc:
            raise SystemExit(f"slackwise plot: {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise SystemExit(f"slackwise plot: {exc}") from None
    for path in draw(runs, args.slo_ms, args.out):
        print(f"plot: {path}")
    return 0
