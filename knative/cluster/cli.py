"""``slackwise deploy``, ``status`` and ``delete``: a thin command line over the cluster client."""

from __future__ import annotations

import argparse
from typing import Any

from knative.cluster.client import (
    KnativeClient,
    ResourceNotFoundError,
    ServiceNotReadyError,
    connect,
    ready_condition,
)

Obj = dict[str, Any]


def add_deploy_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``deploy``, ``status`` and ``delete`` (``-c`` included)."""
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument("-n", "--namespace", default="default", help="Kubernetes namespace")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: KUBECONFIG or ~/.kube)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument(
        "--timeout-s", type=float, default=300.0, help="deploy: seconds to wait for Ready"
    )
    parser.add_argument("--serving-version", help="Knative Serving version, if not detectable")


def _connect(args: argparse.Namespace) -> KnativeClient:
    return connect(
        args.namespace,
        kubeconfig=args.kubeconfig,
        context=args.context,
        serving_version=args.serving_version,
    )


def _services(args: argparse.Namespace) -> list[Obj]:
    from core.config import load_config
    from knative.cluster.manifests import function_service

    config = load_config(args.config)
    return [function_service(fn, args.namespace) for fn in config.functions.values()]


def run_deploy(args: argparse.Namespace, client: KnativeClient | None = None) -> int:
    """Apply every function's Service and wait for each to be Ready."""
    client = client or _connect(args)
    services = _services(args)
    for service in services:
        name = service["metadata"]["name"]
        _, changed = client.apply(service)
        print(f"{name}: {'applied' if changed else 'unchanged'}", flush=True)
    failed = 0
    for service in services:
        name = service["metadata"]["name"]
        try:
            client.wait_ready(name, args.timeout_s, lambda line: print(line, flush=True))
            print(f"{name}: ready at {client.url(name)}", flush=True)
        except ServiceNotReadyError as exc:
            print(f"error: {exc}", flush=True)
            failed += 1
    return 1 if failed else 0


def run_status(args: argparse.Namespace, client: KnativeClient | None = None) -> int:
    """A table of every function's Service: name, ready, url, replicas."""
    client = client or _connect(args)
    rows = [("NAME", "READY", "URL", "REPLICAS")]
    missing = 0
    for service in _services(args):
        name = service["metadata"]["name"]
        try:
            current = client.get(name)
        except ResourceNotFoundError:
            rows.append((name, "absent", "-", "-"))
            missing += 1
            continue
        condition = ready_condition(current)
        ready = condition.get("status", "Unknown")
        if condition.get("reason"):
            ready += f" ({condition['reason']})"
        url = current.get("status", {}).get("url", "-")
        try:
            counts = client.ready_replicas(name)
            replicas = f"{counts.ready}/{counts.desired} (min {counts.min_scale})"
        except ServiceNotReadyError:
            replicas = "-"
        rows.append((name, ready, url, replicas))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 1 if missing else 0


def run_delete(args: argparse.Namespace, client: KnativeClient | None = None) -> int:
    """Delete every function's Service; absent ones are reported, not errors."""
    client = client or _connect(args)
    for service in _services(args):
        name = service["metadata"]["name"]
        try:
            client.delete(name)
            print(f"{name}: deleted")
        except ResourceNotFoundError:
            print(f"{name}: absent")
    return 0
