"""``slackwise simulate``: every stage policy on a simulated workload, a table and OUT.json.

A config with an ``autoscaling`` section compares autoscalers instead (Swayam Fig. 9:
:mod:`simulator.comparison`); ``--policies`` then runs the policy sweep as well.

Errors in the config, the profile set, the trace or a flag print one line naming the file, key
and value, and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from functions.profile_format import ProfileFormatError
from simulator.config import SimConfig, TraceConfig, load_sim_config
from simulator.profiles import ProfileSetError
from simulator.runner import summarise, sweep
from slackwise_config import ConfigError

__all__ = ["add_arguments", "format_table", "run", "updated", "updated_scalers"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", required=True, help="simulator YAML config")
    parser.add_argument("--json", metavar="OUT.json", help="write the results here")
    parser.add_argument("--policies", help="comma-separated policy names (default: the config's)")
    parser.add_argument("--profile", help="cpu, gpu, a directory or a JSON map of profiles")
    parser.add_argument("--seed", type=int, help="seed of arrivals and service times")
    parser.add_argument("--requests", type=int, help="app requests per run")
    parser.add_argument("--rate", type=float, help="offered load in requests per second")
    parser.add_argument("--trace", help="per-second rate trace (file, nasa or twitter)")
    parser.add_argument("--max-rps", type=float, help="with --trace: the trace's peak rate")
    parser.add_argument("--no-search", action="store_true", help="skip the max-rps search")
    parser.add_argument(
        "--per-type",
        action="store_true",
        help="with the search: also the fewest nodes of each function at the config's rate",
    )
    parser.add_argument(
        "--scalers", help="with an autoscaling section: the scalers to compare (the config's)"
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="re-run only --policies (or --scalers) into the existing --json file, keeping its "
        "other results (each records the commit it ran at)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="processes for the policy sweep")
    parser.add_argument(
        "--plots", metavar="DIR", help="draw each app's per-stage latency (Fig. 11) here"
    )


def _fail(message: str) -> int:
    print(f"slackwise: {message}", file=sys.stderr)
    return 2


def _apply(config: SimConfig, args: argparse.Namespace) -> SimConfig:
    changes: dict[str, Any] = {}
    if args.profile:
        changes["profile"] = args.profile
    if args.trace:
        # the config's window and downsampling stay; only the file changes
        base = config.trace
        changes["trace"] = replace(base, name=args.trace) if base else TraceConfig(name=args.trace)
    return replace(config, **changes) if changes else config


def _header(config: SimConfig, rate: float | None, seed: int | None) -> dict[str, Any]:
    """OUT.json's common fields when no policy sweep runs (an autoscaling comparison)."""
    return {
        "workload": config.workload,
        "profile": config.profile,
        "config": config.source,
        "scaling": "compared",
        "seed": config.seed if seed is None else seed,
        "rate_rps": config.rate_rps if rate is None else rate,
        "trace": None if config.trace is None else config.trace.name,
        "policies": {},
    }


def format_table(doc: dict[str, Any]) -> str:
    """The per-policy table the command prints."""
    head = (
        f"{'policy':<8} {'viol%':>7} {'p50 ms':>9} {'p99 ms':>10} {'mean ms':>9} "
        f"{'batch':>6} {'replica-s':>10} {'max rps':>9} {'vs GS':>6}"
    )
    lines = [
        f"{doc['workload']} ({doc['profile']} profiles, {doc['scaling']} fleet): "
        f"{doc['requests']} requests at {doc['rate_rps']:g} rps, seed {doc['seed']}; SLA: "
        f"<= {doc['sla']['max_violation_pct']:g} % miss; SLO ms "
        + ", ".join(f"{k} {v:g}" for k, v in doc["sla"]["slo_ms"].items()),
        head,
    ]
    for name, p in doc["policies"].items():
        rps = p["max_rps_at_sla"]
        vs = p["max_rps_vs_gs"]
        lines.append(
            f"{name:<8} {p['violation_pct']:>7.2f} {p['p50_ms']:>9.1f} {p['p99_ms']:>10.1f} "
            f"{p['mean_ms']:>9.1f} {p['mean_batch']:>6.2f} {p['replica_seconds']:>10.1f} "
            f"{'-' if rps is None else f'{rps:.1f}':>9} {'-' if vs is None else f'{vs:.2f}':>6}"
        )
    both = doc.get("gs_over_best_paper") is not None
    if doc.get("gs_over_best_prior") is not None:
        family = "strengthened baseline's" if both else "prior policy's"
        lines.append(f"GS max rps at SLA / best {family}: {doc['gs_over_best_prior']:.2f}")
    if both:
        paper = doc["gs_over_best_paper"]
        lines.append(f"GS max rps at SLA / best baseline's as in the paper: {paper:.2f}")
    return "\n".join(lines)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # read at call time: a captured stdout may have been swapped
    for flag in ("requests", "rate", "max_rps", "jobs"):
        value = getattr(args, flag, None)
        if value is not None and value <= 0:
            return _fail(f"--{flag.replace('_', '-')} must be positive, got {value}")
    if args.max_rps is not None and not args.trace:
        return _fail("--max-rps needs --trace")
    scalers = getattr(args, "scalers", None)
    if getattr(args, "update", False) and not (args.json and (args.policies or scalers)):
        return _fail(
            "--update needs --json (the file to update) and --policies or --scalers "
            "(what to re-run)"
        )
    from simulator.roma import is_roma_config

    if is_roma_config(args.config):
        return _run_roma(args, out)
    try:
        config = _apply(load_sim_config(args.config), args)
        policies = None
        if args.policies:
            from simulator.config import parse_policies

            policies = parse_policies(args.policies, "--policies")
        rate = args.max_rps if args.max_rps is not None else args.rate
        started = time.perf_counter()
        provenance = _provenance()  # the code as it was when the run loaded it
        autoscaling = config.autoscaling is not None
        doc = (
            sweep(
                config,
                policies=policies,
                rate_rps=rate,
                requests=args.requests,
                seed=args.seed,
                search=not args.no_search,
                per_type=args.per_type,
                jobs=args.jobs,
            )
            if not autoscaling or policies
            else _header(config, rate, args.seed)
        )
        if autoscaling:
            from simulator.comparison import compare

            names = _scaler_names(scalers)
            doc.update(
                compare(config, rate_rps=rate, seed=args.seed, scalers=names, jobs=args.jobs)
            )
        elif scalers:
            raise ValueError(f"--scalers {scalers}: {args.config} has no autoscaling section")
    except (ConfigError, ProfileSetError, ProfileFormatError, ValueError) as exc:
        return _fail(str(exc))
    doc["wall_s"] = round(time.perf_counter() - started, 3)
    doc.update(provenance)
    if getattr(args, "update", False):
        try:
            old = json.loads(Path(args.json).read_text())
            if "autoscalers" in doc and scalers:
                doc = updated_scalers(old, doc)
            else:
                doc = updated(old, doc, per_type=args.per_type)
        except (OSError, ValueError) as exc:
            return _fail(f"--update {args.json}: {exc}")
    if doc["policies"]:
        print(format_table(doc), file=out)
    if "autoscalers" in doc:
        from simulator.comparison import format_fig9

        print(format_fig9(doc), file=out)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"results: {args.json}", file=out)
    if args.plots and doc["policies"]:
        for path in plot_stages(doc, Path(args.plots)):
            print(f"plot: {path}", file=out)
    return 0


def _run_roma(args: argparse.Namespace, out: TextIO) -> int:
    """A ROMA experiment (a config with a ``roma:`` section): the systems' table and JSON."""
    from simulator.roma import SYSTEMS, format_roma, load_roma_config, run_roma

    try:
        config = load_roma_config(args.config)
        if args.seed is not None:
            config = replace(config, seed=args.seed)
        systems = tuple(args.policies.split(",")) if args.policies else SYSTEMS
        started = time.perf_counter()
        provenance = _provenance()  # the code as it was when the run loaded it
        doc = run_roma(config, systems, jobs=args.jobs)
    except (ConfigError, ProfileSetError, ProfileFormatError, ValueError) as exc:
        return _fail(str(exc))
    doc["wall_s"] = round(time.perf_counter() - started, 3)
    doc.update(provenance)
    print(format_roma(doc), file=out)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"results: {args.json}", file=out)
    return 0


def plot_stages(doc: dict[str, Any], out_dir: Path) -> list[Path]:
    """GrandSLAM Fig. 11 per app: one bar per policy, each stage's queue and service stacked."""
    from slackwise_cli.plots import plot_stage_latency

    apps: set[str] = set()
    for result in doc["policies"].values():
        apps.update(result.get("stages", {}))
    paths = []
    for app in sorted(apps):
        breakdown = {
            name: [(s["function"], s["queue_ms"], s["compute_ms"]) for s in result["stages"][app]]
            for name, result in doc["policies"].items()
            if app in result.get("stages", {})
        }
        title = f"{doc['workload']} ({doc['profile']}): {app}, mean latency per stage"
        paths.append(plot_stage_latency(breakdown, out_dir / f"stages-{app}.png", title))
    return paths


#: what two documents must share for one's policies to be merged into the other's
_SAME_RUN = (
    "workload",
    "profile",
    "config",
    "scaling",
    "seed",
    "rate_rps",
    "requests",
    "trace",
    "sla",
)


def updated(old: dict[str, Any], new: dict[str, Any], *, per_type: bool) -> dict[str, Any]:
    """``old`` with the policies ``new`` re-ran replaced (or added), every policy's result
    stamped with the commit it ran at, and the comparisons recomputed from the merged set.
    Raises ValueError when the two are not runs of the same experiment."""
    for key in _SAME_RUN:
        if old.get(key) != new.get(key):
            raise ValueError(f"{key} differs: {old.get(key)!r} in the file, {new.get(key)!r} now")
    policies = {}
    for name, result in old["policies"].items():
        policies[name] = {**result, "commit": result.get("commit", old.get("commit"))}
    for name, result in new["policies"].items():
        policies[name] = {**result, "commit": new["commit"]}
    doc = {**old, "policies": policies, "commit": new["commit"], "machine": new["machine"]}
    doc["updated"] = {
        "policies": list(new["policies"]),  # the ones this run re-ran, in new["wall_s"]
        "wall_s": new["wall_s"],
        "commits": sorted({str(r["commit"]) for r in policies.values()}),
    }
    summarise(doc, per_type=per_type)
    return doc


def _scaler_names(text: str | None) -> list[str] | None:
    if not text:
        return None
    from simulator.config import SCALERS

    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in SCALERS:
            raise ValueError(f"--scalers: unknown scaler {name!r} (known: {', '.join(SCALERS)})")
    return names


def updated_scalers(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old`` with the scalers ``new`` re-ran replaced (or added), in ``old``'s order, each
    row's commit in ``rows_commit`` and the ratios recomputed from the merged rows. Raises
    ValueError when the two are not runs of the same comparison."""
    from simulator.comparison import add_ratios

    for key in ("workload", "profile", "config", "seed", "rate_rps", "trace"):
        if old.get(key) != new.get(key):
            raise ValueError(f"{key} differs: {old.get(key)!r} in the file, {new.get(key)!r} now")
    rows_commit = {
        name: old.get("rows_commit", {}).get(name, old.get("commit")) for name in old["autoscalers"]
    }
    rows = {**old["autoscalers"], **new["autoscalers"]}
    rows_commit.update({name: new["commit"] for name in new["autoscalers"]})
    add_ratios(rows)
    note = (
        f"{', '.join(new['autoscalers'])} re-run at {new['commit']} in {new['wall_s']} s "
        "(slackwise simulate --update --scalers); the other rows at the commits in rows_commit"
    )
    return {
        **old,
        "autoscaling": new["autoscaling"],  # the settings the re-run rows ran with
        "autoscalers": rows,
        "rows_commit": rows_commit,
        "rows_note": " ".join(filter(None, [old.get("rows_note"), note])),
        "commit": new["commit"],
        "machine": new["machine"],
    }


def _provenance() -> dict[str, Any]:
    """What a result JSON records of where it came from beside its settings: the code revision
    (the numbers depend on it) and the machine (its wall time does)."""
    from slackwise_cli.repeats import commit
    from slackwise_cli.results import machine

    root = Path(__file__).resolve().parents[1]
    return {"commit": commit(root), "machine": machine()}
