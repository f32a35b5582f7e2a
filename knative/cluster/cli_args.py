"""The flags of ``slackwise deploy``, ``status`` and ``delete``, without the Kubernetes client:
the command line is built (``slackwise --help``, every other command) where the ``cluster``
extra is not installed."""

from __future__ import annotations

import argparse

__all__ = ["add_deploy_arguments"]


def add_deploy_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``deploy``, ``status`` and ``delete`` (``-c`` included)."""
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument(
        "-n", "--namespace", help="Kubernetes namespace (default: the kubeconfig context's)"
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: KUBECONFIG or ~/.kube)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument(
        "--timeout-s", type=float, default=300.0, help="deploy: seconds to wait for Ready"
    )
    parser.add_argument("--serving-version", help="Knative Serving version, if not detectable")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="deploy and delete: send every call with dryRun=All (the API server and Knative's "
        "webhooks judge it; nothing is stored or deleted); status only reads",
    )
