"""``slackwise deploy``, ``status`` and ``delete``: a thin command line over the cluster client."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

from knative.cluster.cli_args import add_deploy_arguments as add_deploy_arguments
from knative.cluster.client import KnativeClient, ready_condition
from knative.cluster.connection import connect
from knative.cluster.errors import (
    AccessDeniedError,
    KnativeError,
    ResourceNotFoundError,
    ServiceNotReadyError,
)
from knative.errors import PlatformError
from slackwise_config import ConfigError

Obj = dict[str, Any]


class _Refused(PlatformError):
    """A one-line reason the command cannot go on (printed without a traceback)."""


def _connect(args: argparse.Namespace) -> KnativeClient:
    from kubernetes.config.config_exception import ConfigException

    try:
        client = connect(
            args.namespace,
            kubeconfig=args.kubeconfig,
            context=args.context,
            serving_version=args.serving_version,
        )
    except (ConfigException, OSError) as exc:
        raise _Refused(
            f"no usable kubeconfig ({exc}); set KUBECONFIG or --kubeconfig to a cluster's "
            "config (kubectl config view shows the current one)"
        ) from None
    args.namespace = client.namespace
    return client


Command = Callable[..., int]


def _guarded(command: Command) -> Command:
    """One line on stderr and exit status 2 for what the user can fix, never a traceback."""

    @functools.wraps(command)
    def run(args: argparse.Namespace, client: KnativeClient | None = None) -> int:
        verb = command.__name__.removeprefix("run_")
        try:
            return command(args, client)
        except _Refused as exc:
            message = str(exc)
        except ConfigError as exc:
            message = str(exc)
        except AccessDeniedError as exc:
            namespace = args.namespace or "default"
            message = (
                f"{exc}; your user needs get, create, patch and delete on "
                f"services.serving.knative.dev in namespace {namespace}"
            )
        except KnativeError as exc:
            message = str(exc)
        print(f"slackwise {verb}: {message}", file=sys.stderr)
        return 2

    return run


def _services(args: argparse.Namespace, namespace: str) -> list[Obj]:
    from knative.cluster.manifests import function_service
    from slackwise_config import load_config

    config = load_config(args.config)
    return [function_service(fn, namespace) for fn in config.functions.values()]


def _plan(
    args: argparse.Namespace, client: KnativeClient | None
) -> tuple[list[Obj], KnativeClient]:
    """The config's Services (a bad config stops before any cluster call), in the namespace the
    client settles on (``-n``, else the kubeconfig context's), and the client."""
    services = _services(args, args.namespace or "default")
    client = client or _connect(args)
    for service in services:
        service["metadata"]["namespace"] = client.namespace
    return services, client


@_guarded
def run_deploy(args: argparse.Namespace, client: KnativeClient | None = None) -> int:
    """Apply every function's Service (server-side apply) and wait for each to be Ready."""
    services, client = _plan(args, client)
    dry_run = bool(getattr(args, "dry_run", False))
    for service in services:
        name = service["metadata"]["name"]
        _, changed = client.apply(service, dry_run=dry_run)
        state = "would change" if dry_run and changed else "applied" if changed else "unchanged"
        print(f"{name}: {state}{' (dry run: accepted)' if dry_run else ''}", flush=True)
    if dry_run:
        return 0
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


@_guarded
def run_status(args: argparse.Namespace, client: KnativeClient | None = None) -> int:
    """A table of every function's Service: name, ready, url, replicas."""
    services, client = _plan(args, client)
    rows = [("NAME", "READY", "URL", "REPLICAS")]
    missing = 0
    for service in services:
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


@_guarded
def run_delete(args: argparse.Namespace, client: KnativeClient | None = None) -> int:
    """Delete every function's Service; absent ones are reported, not errors."""
    services, client = _plan(args, client)
    dry_run = bool(getattr(args, "dry_run", False))
    for service in services:
        name = service["metadata"]["name"]
        try:
            client.delete(name, dry_run=dry_run)
            print(
                f"{name}: {'would be deleted (dry run: nothing deleted)' if dry_run else 'deleted'}"
            )
        except ResourceNotFoundError:
            print(f"{name}: absent")
    return 0
