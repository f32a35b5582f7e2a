"""The adapter's ServiceAccount, Role and RoleBinding (``00-rbac.yaml``): exactly what it calls on
the cluster, and the metadata every slackwise object carries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ADAPTER_NAME", "PART_OF", "rbac_objects"]

ADAPTER_NAME = "slackwise-adapter"
PART_OF = {"app.kubernetes.io/part-of": "slackwise"}


def _metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta


def rbac_objects(namespace: str | None = None) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding for the adapter."""
    labels = {**PART_OF, "app.kubernetes.io/name": ADAPTER_NAME}
    subject: dict[str, Any] = {"kind": "ServiceAccount", "name": ADAPTER_NAME}
    if namespace:
        subject["namespace"] = namespace
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _metadata(ADAPTER_NAME, namespace, labels),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(ADAPTER_NAME, namespace, labels),
            # exactly what the adapter calls (tests/test_cluster.py runs the adapter's whole
            # cycle against the in-memory API enforcing this Role): its Services' URLs and
            # traffic, the serving revisions' counts and the scale it sets on them, and the
            # PodAutoscalers' actual scale; list and watch so that it follows them by watches
            # (knative.cluster.watch) instead of polling
            "rules": [
                {
                    "apiGroups": ["serving.knative.dev"],
                    "resources": ["services"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["serving.knative.dev"],
                    "resources": ["revisions"],
                    "verbs": ["get", "list", "watch", "patch"],
                },
                {
                    "apiGroups": ["autoscaling.internal.knative.dev"],
                    "resources": ["podautoscalers"],
                    "verbs": ["get", "list", "watch"],
                },
                # ROMA's cores, set in place on the functions' pods (knative.cluster.pod_cores)
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(ADAPTER_NAME, namespace, labels),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": ADAPTER_NAME,
            },
            "subjects": [subject],
        },
    ]
