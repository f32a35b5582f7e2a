"""Making a :class:`~knative.cluster.client.KnativeClient`: from a kubeconfig, or in the cluster.

:func:`connect` reads a kubeconfig file and context as kubectl picks them (the namespace too,
:func:`context_namespace`); :func:`connect_in_cluster` uses the pod's service account, as the
adapter does when it runs inside the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from knative.cluster.client import KnativeClient

__all__ = ["connect", "connect_in_cluster", "context_namespace"]

Obj = dict[str, Any]


def context_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's context (``context``, else the current one), as kubectl
    picks it; ``default`` when the context names none."""
    from kubernetes import config as kube_config

    listing: Callable[..., tuple[list[Obj], Obj]] = kube_config.list_kube_config_contexts
    contexts, current = listing(config_file=kubeconfig)
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    if context and chosen is None:
        names = ", ".join(sorted(str(c.get("name")) for c in contexts)) or "none"
        raise kube_config.ConfigException(f"context {context!r} not in the kubeconfig ({names})")
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def connect(
    namespace: str | None = None,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    serving_version: str | None = None,
) -> KnativeClient:
    """A client from a kubeconfig file (default: ``KUBECONFIG``, else ``~/.kube/config``), in
    ``namespace`` or else the context's own namespace."""
    from kubernetes import config as kube_config

    new_client: Callable[..., k8s.ApiClient] = kube_config.new_client_from_config
    api_client = new_client(config_file=kubeconfig, context=context)
    namespace = namespace or context_namespace(kubeconfig, context)
    return KnativeClient(api_client, namespace, serving_version=serving_version)


def connect_in_cluster(
    namespace: str = "default", *, serving_version: str | None = None
) -> KnativeClient:
    """A client from the pod's service account (the adapter running inside the cluster)."""
    from kubernetes import config as kube_config

    load: Callable[[], None] = kube_config.load_incluster_config
    load()
    return KnativeClient(k8s.ApiClient(), namespace, serving_version=serving_version)
