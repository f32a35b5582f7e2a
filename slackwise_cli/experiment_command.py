"""``slackwise experiment``: replay a trace through each mode, on a fresh local platform per mode,
optionally repeated (medians and ranges) and with a named disturbance in a window."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, TextIO

from slackwise_cli.repeats import commit, order, summarize_repeats
from slackwise_cli.running import load, run_async
from slackwise_config.model import DISTURBANCES, Config, Disturbance, ExperimentConfig


def add_arguments(exp: argparse.ArgumentParser) -> None:
    exp.add_argument("-c", "--config", required=True, help="YAML config with an experiment")
    exp.add_argument("--json", metavar="OUT.json", help="write the results here")
    exp.add_argument("--plots", metavar="DIR", help="draw time series and CCDF plots here")
    exp.add_argument("--trace", help="trace file, or nasa / twitter")
    exp.add_argument("--max-rps", type=float, help="scale the trace's peak to this rate")
    exp.add_argument("--step-s", type=float, help="hold each trace step this long")
    exp.add_argument("--duration-s", type=float, help="seconds of trace to replay")
    exp.add_argument("--start-s", type=float, help="where in the trace to start")
    exp.add_argument("--seed", type=int, help="seed of the Poisson arrivals")
    exp.add_argument(
        "--modes",
        help="comma-separated: direct,mlproxy,slackwise (an app: stage policies such as "
        "FIFO-NB,EDF-DYN,GS)",
    )
    exp.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every mode N times (seeds seed..seed+N-1, the modes' order rotated each "
        "repeat); the table and JSON give medians and ranges",
    )
    exp.add_argument(
        "--disturbance",
        metavar="KIND:START_S:DURATION_S[:N]",
        help="the same disturbance in every mode: cpu (N busy processes, default 1), pause "
        "(the function's replicas stopped), slow (its replicas throttled to 1/N of their CPU "
        "time, default 2) or input (inputs N times the usual size, default 2), e.g. "
        "cpu:20:20:1, slow:20:20:4 or input:20:20:8",
    )


def run(args: argparse.Namespace) -> int:
    import dataclasses
    import json
    from pathlib import Path

    from simulator.roma import is_roma_config
    from slackwise_cli.experiment import run_experiment
    from slackwise_cli.results import ExperimentResult
    from slackwise_config import parse_modes

    if is_roma_config(args.config):  # ROMA's systems, live (slackwise_cli.roma_live)
        from slackwise_cli.roma_live import run_cli

        return run_cli(args.config, args.json, args.modes)
    config = load(args.config)
    exp = config.experiment
    if exp is None:
        raise SystemExit(f"slackwise: {config.source}: no 'experiment' section")
    overrides: dict[str, object] = {}
    for key in ("trace", "max_rps", "step_s", "duration_s", "start_s", "seed"):
        value = getattr(args, key)
        if value is None:
            continue
        positive = key in ("max_rps", "step_s", "duration_s")
        if (positive and value <= 0) or (key == "start_s" and value < 0):
            flag = "--" + key.replace("_", "-")
            need = "positive" if positive else "non-negative"
            raise SystemExit(f"slackwise: {flag} must be {need}, got {value}")
        overrides[key] = value
    if args.modes is not None:
        try:
            overrides["modes"] = parse_modes(args.modes, "--modes", app=exp.app is not None)
        except ValueError as exc:
            raise SystemExit(f"slackwise: {exc}") from None
    if args.disturbance is not None:
        overrides["disturbance"] = parse_disturbance(args.disturbance, exp.duration_s)
    if args.repeat < 1:
        raise SystemExit(f"slackwise: --repeat must be at least 1, got {args.repeat}")
    exp = dataclasses.replace(exp, **overrides)  # type: ignore[arg-type]
    if exp.disturbance is not None and exp.disturbance.end_s > exp.duration_s:
        raise SystemExit(
            f"slackwise: the disturbance ends at {exp.disturbance.end_s:g} s, after the replay's "
            f"{exp.duration_s:g} s"
        )
    _check_window(exp.trace, exp.start_s, exp.duration_s, exp.step_s)
    _check_inputs(config, exp)
    plots = Path(args.plots) if args.plots else None

    async def experiment(k: int) -> ExperimentResult:
        this = dataclasses.replace(exp, seed=exp.seed + k, modes=order(exp.modes, k))
        if args.repeat > 1:
            print(
                f"=== repeat {k + 1} of {args.repeat}: seed {this.seed}, "
                f"order {', '.join(this.modes)}",
                flush=True,
            )
        where = plots / f"repeat-{k + 1}" if plots is not None and args.repeat > 1 else plots
        result, _ = await run_experiment(config, this, out=sys.stdout, plots_dir=where)
        return result

    from slackwise_cli.experiment import ExperimentFailed

    results: list[ExperimentResult] = []
    try:
        for k in range(args.repeat):
            results.append(run_async(experiment(k)))
    except ExperimentFailed as exc:
        raise SystemExit(f"slackwise: {exc}") from None
    doc = results[0].to_json() if len(results) == 1 else summarize_repeats(results)
    if len(results) > 1:
        print_medians(doc, sys.stdout)
    if exp.disturbance is not None:
        doc["disturbance"] = dataclasses.asdict(exp.disturbance)
    doc["command"] = " ".join(["slackwise", *sys.argv[1:]])
    doc["commit"] = commit(Path.cwd())
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"results: {args.json}")
    return 0


def _check_inputs(config: Config, exp: ExperimentConfig) -> None:
    """An ``input`` disturbance needs one function whose model has larger inputs to send."""
    d = exp.disturbance
    if d is None or d.kind != "input":
        return
    if exp.app is not None:
        raise SystemExit(
            f"slackwise: an input disturbance needs a function experiment (its "
            f"model's larger inputs), not the app {exp.app!r}"
        )
    from functions.registry import create_model

    kind = config.functions[str(exp.function)].model
    if create_model(kind).larger_instances(1, int(d.factor)) is None:
        raise SystemExit(
            f"slackwise: an input disturbance: the model {kind!r} of function "
            f"{exp.function!r} has no larger inputs to send"
        )


def parse_disturbance(text: str, duration_s: float) -> Disturbance:
    """``KIND:START_S:DURATION_S[:N]`` (``--disturbance``; N: cores for cpu, the factor for
    slow and input), or exit with the reason."""
    parts = text.split(":")
    kinds = ", ".join(DISTURBANCES)
    if len(parts) not in (3, 4) or parts[0] not in DISTURBANCES:
        raise SystemExit(
            f"slackwise: --disturbance {text!r}: expected KIND:START_S:DURATION_S[:N] "
            f"with KIND one of {kinds}"
        )
    kind = parts[0]
    try:
        start, length = float(parts[1]), float(parts[2])
        n = float(parts[3]) if len(parts) == 4 else (2.0 if kind in ("slow", "input") else 1.0)
    except ValueError:
        raise SystemExit(f"slackwise: --disturbance {text!r}: numbers expected") from None
    if start < 0 or length <= 0:
        raise SystemExit(f"slackwise: --disturbance {text!r}: START_S >= 0, DURATION_S > 0")
    if kind == "slow":
        if not n > 1.0:
            raise SystemExit(f"slackwise: --disturbance {text!r}: a slow factor N must be above 1")
        return Disturbance(kind=kind, start_s=start, duration_s=length, factor=n)
    if kind == "input":
        if n < 2 or n != int(n):
            raise SystemExit(
                f"slackwise: --disturbance {text!r}: an input factor N must be a whole number >= 2"
            )
        return Disturbance(kind=kind, start_s=start, duration_s=length, factor=n)
    if n < 1 or n != int(n):
        raise SystemExit(f"slackwise: --disturbance {text!r}: CORES N must be a whole number >= 1")
    return Disturbance(kind=kind, start_s=start, duration_s=length, cores=int(n))


def print_medians(doc: dict[str, Any], out: TextIO) -> None:
    """The medians over the repeats, with ranges, one line per mode."""
    out.write(f"\nmedians of {doc['repeats']} repeats (range):\n")
    for mode, row in doc["modes"].items():
        spread = doc["ranges"][mode]

        def cell(
            key: str,
            unit: str = "",
            row: dict[str, Any] = row,
            spread: dict[str, list[float]] = spread,
        ) -> str:
            low, high = spread.get(key, [math.nan, math.nan])
            return f"{row.get(key, math.nan):g}{unit} ({low:g}-{high:g})"

        window = row.get("window")
        inside = ""
        if window:
            inside = (
                f"; in the window {window['inside_violation_pct']:g} % misses, "
                f"{window['inside_replica_s']:g} replica-s"
            )
        out.write(
            f"  {mode:<14} misses {cell('violation_pct', ' %')}, after first ready "
            f"{cell('warm_violation_pct', ' %')}, replica-s {cell('replica_seconds')}{inside}\n"
        )


def _check_window(name: str, start_s: float, duration_s: float, step_s: float) -> None:
    """Stop with one line, before anything starts, when the trace is missing, malformed or
    shorter than the window the experiment replays."""
    import math

    from traces import TraceError, load_trace, resolve_trace

    needed = math.ceil(duration_s / step_s - 1e-9)
    try:
        trace = load_trace(resolve_trace(name), start_s=start_s, duration_s=needed)
    except TraceError as exc:
        raise SystemExit(f"slackwise: trace {name!r}: {exc}") from None
    if len(trace) < needed:
        raise SystemExit(
            f"slackwise: trace {name!r} has {len(trace)} s from start_s {start_s:g}, the "
            f"experiment replays {needed} steps (duration_s {duration_s:g} / step_s {step_s:g}); "
            "give a smaller --start-s or --duration-s"
        )
