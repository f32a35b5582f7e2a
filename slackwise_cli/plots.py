"""The experiment's plots (MLProxy Figs. 6–7 style), drawn with matplotlib's Agg backend.

``timeseries.png``: per 5-second window, the P95 latency with the SLO line, the ready replicas,
the SLO miss rate and the mean batch size, one line per mode. ``ccdf.png``: the latency CCDF of
each mode with the SLO marked. For an app, ``stages.png`` (GrandSLAM Fig. 11): one stacked bar per
policy, the mean queueing and compute time of each stage; :func:`plot_stage_latency` is also what
the simulator draws its Fig. 11 with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from slackwise_cli.results import ExperimentResult, ModeRun, StageTime

WINDOW_S = 5.0


def _windows(records: Sequence[dict[str, Any]], slo_ms: float) -> dict[str, list[float]]:
    if not records:
        return {"t": [], "p95": [], "miss": [], "batch": []}
    end = max(r["scheduled"] for r in records)
    edges = np.arange(0.0, end + WINDOW_S, WINDOW_S)
    out: dict[str, list[float]] = {"t": [], "p95": [], "miss": [], "batch": []}
    from slackwise_cli.results import batch_size

    for lo in edges:
        inside = [r for r in records if lo <= r["scheduled"] < lo + WINDOW_S]
        if not inside:
            continue
        ok = [r for r in inside if r["status"] == 200]
        lat = [r["latency"] * 1000.0 for r in ok]
        misses = sum(1 for r in inside if r["status"] != 200 or r["latency"] * 1000.0 > slo_ms)
        sizes = [batch_size(r["headers"]) for r in ok]
        out["t"].append(lo + WINDOW_S / 2)
        out["p95"].append(float(np.percentile(lat, 95)) if lat else float("nan"))
        out["miss"].append(100.0 * misses / len(inside))
        out["batch"].append(float(np.mean(sizes)) if sizes else float("nan"))
    return out


def plot_experiment(
    result: ExperimentResult, runs: dict[str, ModeRun], out_dir: Path
) -> list[Path]:
    """Draw both figures into ``out_dir``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    slo = result.slo_ms
    fig, axes = plt.subplots(4, 1, figsize=(9, 11), sharex=True)
    for mode, run in runs.items():
        w = _windows(run.records, slo)
        axes[0].plot(w["t"], w["p95"], label=mode)
        times = [row["t"] for row in run.timeline]
        (line,) = axes[1].step(
            times, [row["ready"] for row in run.timeline], where="post", label=mode
        )
        axes[1].step(
            times,
            [row.get("desired", row["ready"]) for row in run.timeline],
            where="post",
            linestyle=":",
            color=line.get_color(),
        )
        axes[2].plot(w["t"], w["miss"], label=mode)
        axes[3].plot(w["t"], w["batch"], label=mode)
    axes[0].axhline(slo, color="black", linestyle="--", linewidth=1, label="SLO")
    axes[0].set_ylabel("P95 latency (ms)")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("replicas: ready, asked (dotted)")
    axes[2].set_ylabel("SLO misses (%)")
    axes[3].set_ylabel("mean batch size")
    axes[3].set_xlabel("time (s)")
    axes[0].legend(loc="upper right")
    axes[0].set_title(
        f"{result.function}: {result.trace}, peak {result.max_rps:g} req/s, SLO {slo:g} ms"
    )
    fig.tight_layout()
    series = out_dir / "timeseries.png"
    fig.savefig(series, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 5))
    ccdf_axes(
        ax,
        {
            mode: [r["latency"] * 1000.0 for r in run.records if r["status"] == 200]
            for mode, run in runs.items()
        },
        slo,
    )
    fig.tight_layout()
    ccdf_path = out_dir / "ccdf.png"
    fig.savefig(ccdf_path, dpi=110)
    plt.close(fig)
    paths = [series, ccdf_path]
    if result.stages:
        breakdown = {
            mode: [(fn, s.stages[fn].queue_ms, _service_ms(s.stages[fn])) for fn in result.stages]
            for mode, s in result.modes.items()
            if s.stages
        }
        title = f"{result.function}: mean latency per stage (SLO {slo:g} ms)"
        paths.append(plot_stage_latency(breakdown, out_dir / "stages.png", title, slo_ms=slo))
    return paths


def ccdf_axes(ax: Any, latencies_ms: Mapping[str, Sequence[float]], slo_ms: float) -> None:
    """Each labelled run's latency CCDF on log-log axes (the fraction of requests slower than
    each latency, floored a decade under one request), and the SLO as a dashed line."""
    for label, values in latencies_ms.items():
        lat = np.sort(np.asarray(values, dtype=float))
        if lat.size:
            ccdf = 1.0 - np.arange(1, lat.size + 1) / lat.size
            ax.step(lat, np.maximum(ccdf, 1.0 / (10 * lat.size)), where="post", label=label)
    ax.axvline(slo_ms, color="black", linestyle="--", linewidth=1, label="SLO")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of requests slower (CCDF)")
    ax.legend()


def _service_ms(t: StageTime) -> float:
    """A live stage's service as the request saw it: the round trip, else the compute."""
    return t.upstream_ms if t.upstream_ms == t.upstream_ms else t.compute_ms


def plot_stage_latency(
    breakdown: Mapping[str, Sequence[tuple[str, float, float]]],
    path: Path,
    title: str,
    *,
    slo_ms: float | None = None,
) -> Path:
    """GrandSLAM Fig. 11: per policy, a bar stacking each stage's queueing then service time.

    ``breakdown`` maps a policy to ``[(stage, queue_ms, service_ms), ...]`` in stage order (live:
    the batch's round trip from the adapter; simulated: the drawn service time).
    Queueing is hatched; each stage keeps one colour across policies.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(breakdown)
    stages = [name for name, _, _ in next(iter(breakdown.values()), [])]
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(policies) + 2), 5))
    bottoms = np.zeros(len(policies))
    for k, stage in enumerate(stages):
        for part, hatch in ((1, "//"), (2, "")):
            heights = np.array(
                [float(np.nan_to_num(breakdown[p][k][part])) for p in policies], dtype=float
            )
            label = f"{stage} {'queue' if part == 1 else 'service'}"
            ax.bar(
                policies,
                heights,
                bottom=bottoms,
                color=colours(k % 10),
                hatch=hatch,
                edgecolor="white",
                label=label,
            )
            bottoms += heights
    if slo_ms is not None:
        ax.axhline(slo_ms, color="black", linestyle="--", linewidth=1, label="SLO")
    ax.set_ylabel("mean latency (ms)")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
