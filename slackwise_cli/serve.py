"""``slackwise serve``: the adapter, on the embedded local platform, a running ``slackwise up``
or Knative Services."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from slackwise_cli.running import load, run_async

if TYPE_CHECKING:
    from slackwise_config import Config


def add_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("-c", "--config", required=True, help="YAML config file")
    serve.add_argument("--host", help="listen address (default: adapter.host)")
    serve.add_argument("--port", type=int, help="listen port (default: adapter.port)")
    serve.add_argument(
        "--probe-port",
        type=int,
        help="health and status also on this port, answered by a thread of their own "
        "(default: adapter.probe_port, off)",
    )
    serve.add_argument("--mode", choices=("slackwise", "mlproxy"), help="batching policy")
    serve.add_argument(
        "--platform-url",
        help="a running local platform (`slackwise up`) instead of an embedded one",
    )
    serve.add_argument(
        "--serving-version",
        metavar="X.Y",
        help="Knative Serving's version on the cluster (default: adapter.serving_version; "
        "the adapter's Role cannot read it from the cluster)",
    )
    serve.add_argument(
        "--platform",
        choices=("local", "knative"),
        help="where the functions run (default: adapter.platform, local)",
    )
    serve.add_argument(
        "-n",
        "--namespace",
        help="knative: the functions' namespace (default: adapter.namespace, else the pod's or "
        "the kubeconfig context's)",
    )
    serve.add_argument("--kubeconfig", help="knative: kubeconfig file (default: KUBECONFIG)")
    serve.add_argument("--context", help="knative: kubeconfig context (default: the current)")
    serve.add_argument(
        "--advisor",
        action="store_true",
        help="turn the autoscaling advisor on (adapter.advisor.capacity says how it acts)",
    )
    serve.add_argument(
        "--capacity",
        choices=("kpa", "floor", "own"),
        help="who decides the replica count: the platform's KPA alone (advisor off), the KPA "
        "above the advisor's floor, or the advisor itself (own)",
    )
    serve.add_argument(
        "--headroom",
        metavar="auto|X",
        help="the owned count's spare capacity from the measured volatility: auto (half the "
        "largest swing of the last five minutes), 0 (none) or another share of it "
        "(default: adapter.advisor.headroom, 0)",
    )
    serve.add_argument(
        "--stage-policy",
        metavar="NAME",
        help="how chains split their SLO and batch: GS, ED-*, EDF-*, FIFO-NB "
        "(default: adapter.stage_policy, GS)",
    )


#: the flags that override a key of the config's ``adapter`` section (flag: key), when given
_ADAPTER_FLAGS = {
    "host": "host",
    "probe_port": "probe_port",
    "platform_url": "platform_url",
    "platform": "platform",
    "serving_version": "serving_version",
    "namespace": "namespace",
    "kubeconfig": "kubeconfig",
    "context": "kube_context",
    "stage_policy": "stage_policy",
}


def run(args: argparse.Namespace) -> int:
    from adapter.serving.app import create_app
    from adapter.serving.http_server import serve

    config = load(args.config)
    advisor: bool | None = True if args.advisor else None
    if args.capacity is not None:
        advisor = args.capacity != "kpa"
        if advisor:
            config = _with_advisor(config, capacity=args.capacity)
    if args.headroom is not None:
        config = _with_advisor(config, headroom=_headroom_flag(args.headroom))
    config = with_flags(config, args)
    try:
        app = create_app(config, mode=args.mode, advisor=advisor)
    except ValueError as exc:
        raise SystemExit(f"slackwise: {exc}") from None
    host = args.host or config.adapter.host
    port = config.adapter.port if args.port is None else args.port
    mode = args.mode or config.adapter.mode

    def listening(bound: int) -> None:
        print(f"slackwise adapter ({mode}) on http://{host}:{bound}", flush=True)

    from adapter.serving.platform_view import PlatformUnreachable
    from adapter.serving.records import RecordsUnwritable

    try:
        run_async(serve(app, host, port, ready=listening))
    except (PlatformUnreachable, RecordsUnwritable) as exc:
        raise SystemExit(f"slackwise: {exc}") from None
    except OSError as exc:
        raise SystemExit(f"slackwise: cannot listen on {host}:{port}: {exc}") from None
    return 0


def with_flags(config: Config, args: argparse.Namespace) -> Config:
    """``config`` with the adapter keys that ``args`` gives (``_ADAPTER_FLAGS``), checked."""
    if args.probe_port is not None and not 0 <= args.probe_port <= 65535:
        raise SystemExit(f"slackwise: --probe-port must be a TCP port, got {args.probe_port}")
    given = {
        setting: getattr(args, flag)
        for flag, setting in _ADAPTER_FLAGS.items()
        if getattr(args, flag) not in (None, "")
    }
    if "stage_policy" in given:
        from slackwise_policies.slack import stage_policy

        try:
            given["stage_policy"] = stage_policy(given["stage_policy"]).name
        except ValueError as exc:
            raise SystemExit(f"slackwise: --stage-policy: {exc}") from None
    if not given:
        return config
    import dataclasses

    return dataclasses.replace(config, adapter=dataclasses.replace(config.adapter, **given))


def _headroom_flag(text: str) -> float | str:
    """``--headroom``'s value: ``auto`` or a number >= 0; exits naming the value otherwise."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):
        raise SystemExit(f"slackwise serve: --headroom must be auto or a number >= 0, got {text!r}")
    return value


def _with_advisor(config: Config, **changes: object) -> Config:
    """``config`` with ``adapter.advisor``'s ``changes`` (the flags that override it)."""
    import dataclasses

    settings = dataclasses.replace(config.adapter.advisor, **changes)  # type: ignore[arg-type]
    adapter = dataclasses.replace(config.adapter, advisor=settings)
    return dataclasses.replace(config, adapter=adapter)
