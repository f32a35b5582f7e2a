"""Each disturbance on the (replica-seconds, misses) plane: does the owned count dominate the KPA?

Reads the live experiments' JSONs (medians of their repeats, ranges as bars; misses after the
first ready replica, so the cold start every mode pays at second zero does not hide the rest)
and the simulated disturbances' JSON (``benchmarks/disturbance_sim.py``: medians of its seeds;
misses among all the hour's requests).
Prints, per scenario, whether slackwise (the default, ``headroom: auto``) sits below and to the
left of the KPA mode (no more misses and no more replica-seconds), and draws one panel per
scenario to ``--png``.

    .venv/bin/python benchmarks/cost_miss_plane.py --png docs/img/cost-miss-plane.png

``slackwise report`` copies the printed table into docs/advisor.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: live scenario: JSON (experiments/results), the KPA mode's name there
LIVE = {
    "live, quiet (make run's window)": "make-run.json",
    "live, one busy core 20-40 s": "interference.json",
    "live, replicas stopped 5 s": "stall.json",
    "live, CPU quartered 20-40 s": "slow.json",
    "live, inputs x4 20-40 s": "input-4.json",
    "live, inputs x8 20-40 s": "input.json",
}
#: the simulated disturbances' JSONs, oldest first: a scenario a later one re-ran is read from it
#: (``disturbance_sim.py --kinds pause`` re-runs the stall alone)
SIMS = (
    "experiments/sim/results/disturbance.json",
    "experiments/sim/results/disturbance-stall.json",
)
OWNED, KPA_LIVE, KPA_SIM = "slackwise", "slackwise-kpa", "kpa"


def _live(name: str) -> dict[str, tuple[float, float, tuple[float, float, float, float]]] | None:
    """mode: (replica-s, misses after first ready %, (their ranges)) from one live JSON."""
    path = ROOT / "experiments" / "results" / name
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    out = {}
    for mode, row in doc["modes"].items():
        if mode == "direct":
            continue
        ranges = doc.get("ranges", {}).get(mode, {})
        rs = ranges.get("replica_seconds", [row["replica_seconds"]] * 2)
        miss = ranges.get("warm_violation_pct", [row["warm_violation_pct"]] * 2)
        out[mode] = (row["replica_seconds"], row["warm_violation_pct"], (*rs, *miss))
    return out


def _sim() -> dict[str, tuple[dict[str, Any], str]]:
    """``simulated, <disturbance>``: (scaler: (replica-s, misses %, their ranges), commit), each
    from the last of :data:`SIMS` that holds it."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for name in SIMS:
        path = ROOT / name
        if path.exists():
            doc = json.loads(path.read_text())
            for what, panel in _panels(doc).items():
                out[f"simulated, {what}"] = (panel, str(doc.get("commit", "?")))
    return out


def _panels(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for what, block in doc["disturbances"].items():
        panel: dict[str, Any] = {}
        for label in block.get("scalers", sorted({r["scaler"] for r in block["runs"]})):
            runs = [r for r in block["runs"] if r["scaler"] == label]
            rs = [r["replica_seconds"] for r in runs]
            miss = [r["violation_pct"] for r in runs]
            panel[label] = (statistics.median(rs), statistics.median(miss),
                            (min(rs), max(rs), min(miss), max(miss)))  # fmt: skip
        out[what] = panel
    return out


def _verdict(panel: dict[str, Any], kpa: str) -> str:
    if OWNED not in panel or kpa not in panel:
        return "not run"
    rs, miss, _ = panel[OWNED]
    k_rs, k_miss, _ = panel[kpa]
    ok = rs <= k_rs and miss <= k_miss
    return (f"{'yes' if ok else 'no'}: {miss:.2f} % against {k_miss:.2f} %, "
            f"{rs / k_rs:.2f}x its replica-s")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--png", type=Path, help="draw the panels here")
    args = parser.parse_args(argv)
    panels: dict[str, tuple[dict[str, Any], str]] = {}
    for what, name in LIVE.items():
        live = _live(name)
        if live is not None:
            panels[what] = (live, KPA_LIVE)
    commits: dict[str, str] = {}
    for what, (panel, at) in _sim().items():
        panels[what] = (panel, KPA_SIM)
        commits[what] = at
    print("| scenario | slackwise below and left of the KPA mode? |")
    print("|---|---|")
    for what, (panel, kpa) in panels.items():
        at = f" (commit {commits[what]})" if what in commits else ""
        print(f"| {what}{at} | {_verdict(panel, kpa)} |")
    print("\nLive: misses after the first ready replica, medians of 3 runs; simulated: misses "
          "among the hour's requests, medians of 3 seeds.")  # fmt: skip
    if args.png:
        _draw(panels, args.png)
    return 0


def _draw(panels: dict[str, tuple[dict[str, Any], str]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 3.6 * rows), squeeze=False)
    for ax, (what, (panel, kpa)) in zip(axes.flat, panels.items(), strict=False):
        for label, (rs, miss, (rs_lo, rs_hi, m_lo, m_hi)) in panel.items():
            marker = "s" if label == kpa else ("o" if label == OWNED else "^")
            ax.errorbar(rs, miss, xerr=[[rs - rs_lo], [rs_hi - rs]],
                        yerr=[[miss - m_lo], [m_hi - miss]], fmt=marker, capsize=2,
                        label=label)  # fmt: skip
        ax.set_title(what, fontsize=9)
        ax.set_xlabel("replica-seconds")
        ax.set_ylabel("misses %")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
