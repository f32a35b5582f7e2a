"""Who may reach the functions' pods on a cluster: a NetworkPolicy written with the manifests.

On Knative a request reaches a function's pod through Knative's own data path (the activator in
``knative-serving`` while it scales from zero, the networking layer's gateway pods in their
namespace otherwise), never straight from a client; so the policy admits exactly those and the
adapter's own pods, and every other pod in the cluster, including the namespace's other
workloads, is refused at the network. A caller cannot skip the adapter's queue and SLO by
calling the pods; calling the Service through the cluster-local gateway is still possible for
pods the gateway serves, which the functions' ``cluster-local`` visibility limits to the
cluster (the ingress's own authorization, Istio's AuthorizationPolicy for one, closes that too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["KNATIVE_SERVING_NAMESPACE", "function_network_policy"]

KNATIVE_SERVING_NAMESPACE = "knative-serving"
#: the networking layer's namespace (net-kourier's; Istio's is istio-system)
DEFAULT_INGRESS_NAMESPACE = "kourier-system"
#: the label Knative puts on every pod of a Service's revisions
SERVICE_LABEL = "serving.knative.dev/service"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"


def function_network_policy(
    functions: Sequence[str],
    adapter_labels: dict[str, str],
    *,
    namespace: str | None = None,
    ingress_namespace: str = DEFAULT_INGRESS_NAMESPACE,
    name: str = "slackwise-functions",
) -> dict[str, Any]:
    """A ``networking.k8s.io/v1`` NetworkPolicy over the pods of ``functions``: ingress only from
    the adapter's pods (``adapter_labels``), Knative's activator namespace and the ingress's."""
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "slackwise"}}
    if namespace:
        metadata["namespace"] = namespace

    def from_namespace(ns: str) -> dict[str, Any]:
        return {"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: ns}}}

    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": {
                "matchExpressions": [
                    {"key": SERVICE_LABEL, "operator": "In", "values": sorted(functions)}
                ]
            },
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {"matchLabels": dict(adapter_labels)}},
                        from_namespace(KNATIVE_SERVING_NAMESPACE),
                        from_namespace(ingress_namespace),
                    ]
                }
            ],
        },
    }
