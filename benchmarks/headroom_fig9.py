"""The owned count's spare on the Fig. 9 traces: what ``advisor.headroom`` and the burst threshold
``advisor.burst_u`` cost where nothing swings but the rate, against the frontier.

Each Fig. 9 config (embed on its CPU profile, an hour of a real trace scaled to its peak, seed 1),
slackwise's owned count at each ``headroom`` (default: 0, the lean count, and ``auto``) and each
``burst_u`` (default: the config's), the rest of the config as the Fig. 9 tables run it. The
table gives replica-seconds, their ratio to ClairA2 and to the cheapest point of the past-only
frontier that complies (both from ``--frontier``, ``benchmarks/scaler_frontier.py``'s JSON, same
configs and seed), Swayam's window compliance, and how many decisions carried a spare.

    .venv/bin/python benchmarks/headroom_fig9.py --jobs 2 \\
        --json experiments/sim/results/headroom-fig9.json \\
        > experiments/sim/results/headroom-fig9.txt
    .venv/bin/python benchmarks/headroom_fig9.py --jobs 2 --headroom 0 --burst-u 1.3,1.6,2 \\
        --json experiments/sim/results/burst-u-fig9.json \\
        > experiments/sim/results/burst-u-fig9.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from simulator.comparison import learning_scaler
from simulator.comparison_case import case_for, scaler_row
from simulator.config import load_sim_config
from simulator.engine import Simulation
from simulator.pool import map_jobs
from simulator.swayam_scalers import OwnedScaler
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine
from slackwise_policies.function_autoscaler import FunctionAutoscaler

ROOT = Path(__file__).resolve().parent.parent
TRACES = ("nasa", "twitter", "big-spike", "steep-tri-phase")
#: the Fig. 9 setup on traces nothing was tuned on (their frontier: scaler-frontier-azure.json)
UNTUNED = ("azure-llm-code", "azure-llm-conv")
FRONTIER = ROOT / "experiments" / "sim" / "results" / "scaler-frontier.json"


def _config(trace: str) -> str:
    return f"experiments/sim/autoscale-{trace}.yaml"


def _run(
    trace: str,
    headroom: float | Literal["auto"],
    burst_u: float | Literal["auto"] | None,
    current_window_s: float | None = None,
    sla_window: int | None = None,
) -> dict[str, Any]:
    config = load_sim_config(ROOT / _config(trace))
    auto = config.autoscaling
    assert auto is not None
    advisor = replace(auto.advisor, headroom=headroom)
    if burst_u is not None:
        advisor = replace(advisor, burst_u=burst_u)
    if current_window_s is not None:
        advisor = replace(advisor, current_window_s=current_window_s)
    if sla_window is not None:
        advisor = replace(advisor, sla_window=sla_window)
    config = replace(config, autoscaling=replace(auto, advisor=advisor))
    case = case_for(config, config.rate_rps, config.seed)
    scaler, bootstrap = learning_scaler(config, "slackwise", case)
    sim = Simulation(
        config, case.policy, case.curves, rate_rps=config.rate_rps, requests=len(case.arrivals),
        seed=config.seed, scaler=scaler, arrivals=case.arrivals,
    )  # fmt: skip
    assert isinstance(scaler, OwnedScaler)
    counted: dict[str, Any] = {"decisions": 0, "with_spare": 0, "u": []}
    bind = scaler.bind

    def counted_bind(function: str, model: Any, limit: Any) -> None:
        bind(function, model, limit)  # the engine binds each function when it starts
        auto_fn = scaler.functions[function]
        auto_fn.decide = _counting(auto_fn, counted)  # type: ignore[method-assign]

    scaler.bind = counted_bind  # type: ignore[method-assign]
    result = sim.run()
    latencies, _ = sim.latencies_by_arrival()
    row = scaler_row("slackwise", result, latencies, case.slo_ms, case.level, case.auto,
                     case.setup_s, bootstrap, None)  # fmt: skip
    us = sorted(counted.pop("u"))
    if us:  # the U each decision used (one number unless burst_u is auto)
        counted["u_median"] = us[len(us) // 2]
        counted["u_p90"] = us[int(0.9 * (len(us) - 1))]
    row.update(trace=trace, headroom=headroom, burst_u=advisor.burst_u,
               current_window_s=advisor.current_window_s, sla_window=advisor.sla_window,
               **counted)  # fmt: skip
    return row


def _counting(auto_fn: FunctionAutoscaler, counted: dict[str, Any]) -> Any:
    """``auto_fn.decide`` that counts its decisions and those that carried a spare, and keeps
    the U each used."""
    decide = auto_fn.decide

    def counting(*args: Any, **kwargs: Any) -> int:
        count = decide(*args, **kwargs)
        counted["decisions"] += 1
        counted["with_spare"] += int(auto_fn.last is not None and auto_fn.last.spare > 0)
        if auto_fn.last is not None:
            counted["u"].append(auto_fn.last.burst_u)
        return count

    return counting


def _references(frontier: dict[str, Any]) -> dict[str, tuple[float, dict[str, Any] | None]]:
    """Each trace's ClairA2 replica-seconds and the frontier's cheapest compliant point."""
    by_config = {doc["config"]: doc for doc in frontier["traces"].values()}
    return {
        t: (by_config[_config(t)]["clair_a2"], by_config[_config(t)]["cheapest_compliant"])
        for t in (*TRACES, *UNTUNED)
        if _config(t) in by_config
    }


def _table(rows: list[dict[str, Any]], frontier: dict[str, Any], source: Path = FRONTIER) -> None:
    refs = _references(frontier)
    judged = any(r.get("sla_window") for r in rows)  # the column only where a run set it
    print(
        "| trace | U | headroom | current window s | "
        + ("SLA window | " if judged else "")
        + "replica-s | / ClairA2 | / frontier's cheapest | compliance % | decisions with a spare |"
    )
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if judged else ""))
    for trace in (*TRACES, *UNTUNED):
        clair, cheapest = refs.get(trace, (None, None))
        for r in (r for r in rows if r["trace"] == trace):
            spared = f"{r['with_spare']} of {r['decisions']}" if "decisions" in r else "not counted"
            to_clair = f"{r['replica_seconds'] / clair:.2f}" if clair else "-"
            best = cheapest["replica_seconds"] if cheapest else None
            to_front = f"{r['replica_seconds'] / best:.2f}" if best else "-"
            u = r.get("burst_u", "-")
            if u == "auto" and "u_median" in r:
                u = f"auto ({r['u_median']:.2f}, P90 {r['u_p90']:.2f})"
            window = r.get("current_window_s", "-")
            if judged:
                window = f"{window} | {r.get('sla_window') or 'whole run'}"
            print(f"| {trace} | {u} | {r['headroom']} | {window} "
                  f"| {r['replica_seconds']:.0f} | {to_clair} | {to_front} "
                  f"| {r['compliance_pct']:.1f} | {spared} |")  # fmt: skip
    frontier_at = frontier.get("commit", "?")
    print(
        f"\nSeed 1 (each config's), experiments/sim/autoscale-*.yaml; ClairA2 and the frontier "
        f"from {_shown(source)} (commit {frontier_at})."
    )


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it lies inside it."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def _values(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument("--table", type=Path, help="print the table of a JSON written before")
    parser.add_argument(
        "--headroom", default="0,auto", help="advisor.headroom values, comma-separated"
    )
    parser.add_argument(
        "--burst-u", default="", help="advisor.burst_u values, comma-separated (the config's)"
    )
    parser.add_argument(
        "--current-window-s",
        type=float,
        help="advisor.current_window_s: the span of the current rate (default: the config's)",
    )
    parser.add_argument(
        "--sla-window",
        type=int,
        help="advisor.sla_window: the requests the SLO percentile is judged over (0: the whole "
        "replay; default: the config's)",
    )
    parser.add_argument(
        "--traces", default=",".join(TRACES), help="which Fig. 9 traces, comma-separated"
    )
    parser.add_argument("--frontier", type=Path, default=FRONTIER, help="the frontier's JSON")
    args = parser.parse_args(argv)
    frontier = json.loads(args.frontier.read_text())
    if args.table:
        doc = json.loads(args.table.read_text())
        _table(doc["runs"], frontier, args.frontier)
        print(f"Runs at commit {doc['commit']}.")
        return 0
    try:
        headrooms: list[float | Literal["auto"]] = [
            "auto" if h == "auto" else float(h) for h in _values(args.headroom)
        ]
        burst_us: list[float | Literal["auto"] | None] = [
            "auto" if u == "auto" else float(u) for u in _values(args.burst_u)
        ] or [None]
    except ValueError as exc:
        parser.error(f"--headroom and --burst-u take numbers or auto: {exc}")
    window = args.current_window_s
    if window is not None and not window > 0:
        parser.error(f"--current-window-s must be > 0, got {window!r}")
    if args.sla_window is not None and args.sla_window < 0:
        parser.error(f"--sla-window must be >= 0, got {args.sla_window!r}")
    traces = _values(args.traces)
    unknown = sorted(set(traces) - {*TRACES, *UNTUNED})
    if unknown:
        known = ", ".join((*TRACES, *UNTUNED))
        parser.error(f"--traces: no Fig. 9 trace named {', '.join(unknown)} (one of {known})")
    jobs = [(t, h, u, window, args.sla_window) for t in traces for u in burst_us for h in headrooms]
    rows = map_jobs(_run, jobs, args.jobs)
    _table(rows, frontier, args.frontier)
    print(f"Runs at commit {commit(ROOT)}.")
    if args.json:
        command = " ".join(["benchmarks/headroom_fig9.py", *(argv or sys.argv[1:])])
        doc = {"runs": rows, "commit": commit(ROOT), "machine": machine(), "command": command}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
