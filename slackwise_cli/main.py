"""The ``slackwise`` command line.

Subcommands: ``up`` (start the local platform and wait), ``demo`` (the main job until the
adapter's experiment lands), ``profile`` (measure a model's batch latency and cold start),
``validate`` (check a config file) and ``models`` (list the model kinds). Logging is configured
here and nowhere else.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from slackwise_cli.running import load, run_async
from slackwise_config import Config, FunctionConfig
from slackwise_core.errors import CoreError
from slackwise_core.scaling_values import KPA_CLASS

logger = logging.getLogger("slackwise")


_run = run_async
_load = load


async def _up(config: Config) -> int:
    from knative.local.platform import LocalPlatform

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with LocalPlatform(config) as platform:
            print(f"slackwise local platform: http://{config.platform.host}:{platform.port}")
            for name in platform.functions:
                fn = config.functions[name]
                print(
                    f"  {name:<16} {platform.url(name)}/v1/models/{name}:predict"
                    f"  (model {fn.model}, containerConcurrency {fn.container_concurrency})"
                )
            from knative.local.guard import ENV_VAR, write_token

            assert platform.port is not None
            where = write_token(platform.token, platform.port)
            print(
                "admin: GET /platform/functions, PUT /platform/functions/NAME/min-scale, "
                "GET /platform/events; Ctrl-C stops everything",
                flush=True,
            )
            print(
                f"token (Authorization: Bearer; {ENV_VAR} overrides): {where}, readable by "
                "you alone; `slackwise serve --platform-url` reads it",
                flush=True,
            )
            await stop.wait()
            print("\nstopping: terminating replicas", flush=True)
            for name in platform.functions:
                print(f"  {name}: {platform.usage(name)}")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    return _run(_up(_load(args.config)))


def _cmd_demo(args: argparse.Namespace) -> int:
    from slackwise_cli.demo import DemoPlan, run_demo

    plan = DemoPlan(
        burst=args.burst, rate_rps=args.rate, steady_s=args.duration, idle_limit_s=args.idle_limit
    )
    return _run(run_demo(_load(args.config), plan, sys.stdout))


def what(fn: FunctionConfig) -> str:
    """A function's model, or who serves it when another system does."""
    if fn.model:
        return f"model {fn.model} ({fn.variant})"
    return f"served by another system ({fn.upstream.url or fn.service}, {fn.upstream.protocol})"


def _cmd_validate(args: argparse.Namespace) -> int:
    config = _load(args.config)
    print(f"{config.source}: ok")
    for name, fn in config.functions.items():
        s = fn.scaling
        target = f"{s.metric} target {s.target:g} x {s.target_utilization:g}"
        if s.autoscaler_class != KPA_CLASS:
            target = f"{s.autoscaler_class} on {s.metric} at {s.target:g} (cluster only)"
        print(
            f"  function {name}: {what(fn)}, containerConcurrency "
            f"{fn.container_concurrency}, {target}, scale {s.min_scale}..{s.max_scale or 'inf'}, "
            f"initial {s.initial_scale}"
        )
    for name, app in config.apps.items():
        print(f"  app {name}: {' -> '.join(app.stages)}, P{app.percentile:g} <= {app.slo_ms:g} ms")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from functions.registry import KINDS, model_class

    for kind in sorted(KINDS):
        print(f"{kind:<12} {model_class(kind).summary}")
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    import json

    from knative.cluster.dashboard import dashboard

    print(json.dumps(dashboard(), indent=2))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from slackwise_cli import report

    root = Path(args.root).resolve()
    if not (root / "docs").is_dir():
        print(f"slackwise: --root {args.root}: no docs/ directory there", file=sys.stderr)
        return 2
    if args.run:
        for group in report.GROUPS if args.run == "all" else (args.run,):
            status = report.run_group(group, root, jobs=args.jobs)
            if status:
                return status
    try:
        stale = report.update_docs(root, check=args.check)
    except ValueError as exc:
        print(f"slackwise: {exc}", file=sys.stderr)
        return 2
    for block in stale:
        where = f"{block.doc.relative_to(root)}:{block.start + 1}"
        verb = "differs from" if args.check else "rewritten from"
        print(f"{where}: {block.kind} table {verb} {', '.join(block.sources)}")
    if not stale:
        print("every report table matches its results")
    return 1 if args.check and stale else 0


def build_parser() -> argparse.ArgumentParser:
    from adapter.serving.routes import version

    parser = argparse.ArgumentParser(prog="slackwise", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument("--version", action="version", version=f"slackwise {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="start the local platform with the configured functions")
    up.add_argument("-c", "--config", required=True, help="YAML config file")
    up.set_defaults(func=_cmd_up)

    serve = sub.add_parser("serve", help="run the adapter (with the embedded local platform)")
    from slackwise_cli import serve as serve_cli

    serve_cli.add_arguments(serve)
    serve.set_defaults(func=serve_cli.run)

    exp = sub.add_parser("experiment", help="replay a trace through direct, mlproxy, slackwise")
    from slackwise_cli import experiment_command

    experiment_command.add_arguments(exp)
    exp.set_defaults(func=experiment_command.run)

    rep = sub.add_parser("replay", help="open-loop replay of a trace against a URL")
    from loadtests import replay

    replay.add_arguments(rep)
    rep.set_defaults(func=replay.run)

    _cluster_commands(sub)

    demo = sub.add_parser("demo", help="scale real functions from zero and back under load")
    _demo_arguments(demo)
    demo.set_defaults(func=_cmd_demo)

    simulate = sub.add_parser("simulate", help="every stage policy on a simulated workload")
    from slackwise_cli import simulate as simulator_cli

    simulator_cli.add_arguments(simulate)
    simulate.set_defaults(func=simulator_cli.run)

    report = sub.add_parser(
        "report", help="re-render the docs' result tables from their JSON (--run: re-run first)"
    )
    _report_arguments(report)
    report.set_defaults(func=_cmd_report)

    validate = sub.add_parser("validate", help="check a config file")
    validate.add_argument("-c", "--config", required=True, help="YAML config file")
    validate.set_defaults(func=_cmd_validate)

    models = sub.add_parser("models", help="list the model kinds")
    models.set_defaults(func=_cmd_models)

    dash = sub.add_parser("dashboard", help="print the Grafana dashboard of the adapter's metrics")
    dash.set_defaults(func=_cmd_dashboard)

    plot = sub.add_parser("plot", help="figures of replay records or Locust CSV histories")
    from slackwise_cli import plot_command

    plot_command.add_arguments(plot)
    plot.set_defaults(func=plot_command.run)

    prof = sub.add_parser("profile", help="measure a model's batch latency and cold start")
    from functions import profile

    profile.add_arguments(prof)
    prof.set_defaults(func=profile.run)
    return parser


def _cluster_commands(sub: Any) -> None:
    """``manifests``, ``deploy``, ``status`` and ``delete``: the Knative cluster's commands."""
    from knative.cluster import cli_args, manifests_command

    man = sub.add_parser("manifests", help="write Knative manifests for the config")
    manifests_command.add_arguments(man)
    man.set_defaults(func=manifests_command.run)
    for name, helptext in (
        ("deploy", "apply the functions to a Knative cluster and wait for Ready"),
        ("status", "show the functions on a Knative cluster"),
        ("delete", "delete the functions from a Knative cluster"),
    ):
        cmd = sub.add_parser(name, help=helptext)
        cli_args.add_deploy_arguments(cmd)
        cmd.set_defaults(func=_on_cluster(name))


def _on_cluster(name: str) -> Callable[[argparse.Namespace], int]:
    """``run_<name>`` of the cluster commands, imported when it runs (it needs the optional
    ``kubernetes`` client, which the parser must not)."""

    def command(args: argparse.Namespace) -> int:
        from knative.cluster import cli as cluster_cli

        run: Callable[[argparse.Namespace], int] = getattr(cluster_cli, f"run_{name}")
        return run(args)

    return command


def _demo_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("-c", "--config", required=True, help="YAML config file")
    demo.add_argument("--burst", type=int, default=8, help="requests sent at once at zero")
    demo.add_argument("--rate", type=float, default=4.0, help="Poisson rate after the burst")
    demo.add_argument("--duration", type=float, default=20.0, help="seconds of Poisson load")
    demo.add_argument(
        "--idle-limit", type=float, default=90.0, help="seconds to wait for scale to zero"
    )


def _report_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument(
        "--check",
        action="store_true",
        help="only list the tables that differ from their JSON (exit 1 if any)",
    )
    report.add_argument(
        "--run",
        choices=("fig9", "grandslam", "roma", "live", "all"),
        help="re-run this group first (live: every live experiment, three repeats of most: "
        "about three hours on two cores)",
    )
    report.add_argument("--jobs", type=int, default=2, help="processes per simulation")
    report.add_argument("--root", default=".", help="the project directory (docs/, experiments/)")


def _check_positive(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    for key in ("burst", "rate", "duration", "idle_limit"):
        value = getattr(args, key, None)
        if value is not None and value < 0:
            parser.error(f"--{key.replace('_', '-')} must be non-negative, got {value}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_positive(args, parser)
    level = logging.WARNING - 10 * args.verbose
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        result: int = args.func(args)
    except ModuleNotFoundError as exc:  # a plain install: no cluster extra
        if (exc.name or "").partition(".")[0] != "kubernetes":
            raise
        raise SystemExit(
            f"slackwise {args.command}: talking to a Kubernetes cluster needs its client, the "
            "'cluster' extra: pip install 'slackwise[cluster]'"
        ) from None
    except Exception as exc:
        if isinstance(exc, one_line_errors()):  # what no command caught: one line, exit 1
            raise SystemExit(f"slackwise: {exc}") from None
        raise
    return result


def one_line_errors() -> tuple[type[Exception], ...]:
    """The command line's boundary table: the package roots whose errors it answers with one
    line and exit status 1 when no command caught them first (a command that can say more,
    or exit 2 for a bad argument, catches its own). Imported here, when one is raised, so no
    command pays for the imports."""
    from functions.errors import FunctionsError
    from knative.errors import PlatformError
    from loadtests.errors import LoadError
    from traces.errors import TraceError

    return (CoreError, PlatformError, FunctionsError, TraceError, LoadError)


if __name__ == "__main__":
    sys.exit(main())
