"""The adapter's objects (``20-adapter.yaml``): its ConfigMap, Deployment, Service, PDB and HPA.

The Deployment runs ``slackwise serve --platform knative`` as a non-root user on a read-only root
file system (what it writes goes to emptyDirs), with probes on a port of their own, and drains on
SIGTERM after a preStop pause; the HorizontalPodAutoscaler (:mod:`knative.cluster.hpa`) owns its
replica count.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import Any

from knative.cluster.crd_schema import ManifestError
from knative.cluster.hpa import adapter_hpa
from knative.cluster.images import RUN_AS_USER, VERSION, container_security
from knative.cluster.rbac_manifests import ADAPTER_NAME, PART_OF, _metadata
from slackwise_config import HpaSettings

__all__ = [
    "ADAPTER_IMAGE",
    "ADAPTER_PORT",
    "ADAPTER_PROBE_PORT",
    "CONFIG_DIGEST",
    "CONFIG_DIR",
    "CONFIG_FILE",
    "DRAIN_S",
    "IMAGE_WORKDIR",
    "PRE_STOP_S",
    "SCRAPE",
    "adapter_objects",
]

ADAPTER_IMAGE = f"slackwise/adapter:{VERSION}"
ADAPTER_PORT = 8080
#: the adapter's probe port (adapter.serving.probe_port): health and status from a thread
ADAPTER_PROBE_PORT = 8081
CONFIG_DIR = "/etc/slackwise"
CONFIG_FILE = "config.yaml"
#: seconds the pod keeps serving after it left the Service's endpoints (preStop), and the
#: adapter's own drain after SIGTERM (in-flight batches finish within it)
PRE_STOP_S = 5
DRAIN_S = 10
#: the adapter pod's annotation holding its config's SHA-256
CONFIG_DIGEST = "slackwise.dev/config-sha256"
#: Prometheus's scrape annotations on the adapter's pods (GET /metrics on its port)
SCRAPE = {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": str(ADAPTER_PORT),
    "prometheus.io/path": "/metrics",
}
#: the adapter image's working directory (adapter/Dockerfile), where relative paths land
IMAGE_WORKDIR = "/app"


def _writable(records: str | None) -> list[tuple[str, str]]:
    """(volume name, mount path) of the emptyDirs the adapter writes to, its root file system
    being read-only: /tmp, and the directory of its records file (``-``: stdout, none)."""
    dirs = [("tmp", "/tmp")]
    if records and records != "-":
        where = posixpath.dirname(posixpath.join(IMAGE_WORKDIR, records)) or IMAGE_WORKDIR
        if where not in ("/tmp", IMAGE_WORKDIR):
            dirs.append(("records", where))
        elif where == IMAGE_WORKDIR:  # a bare file name: give it a directory of its own
            raise ManifestError(
                f"adapter.records: {records!r} would be written into the image's {IMAGE_WORKDIR}, "
                "which is read-only on a cluster; give it a directory (records/out.jsonl), "
                "or '-' for the adapter's stdout"
            )
    return dirs


def _adapter_args() -> list[str]:
    listen = ["--host", "0.0.0.0", "--port", str(ADAPTER_PORT)]
    return ["--platform", "knative", *listen, "--probe-port", str(ADAPTER_PROBE_PORT)]


def _probe_get() -> dict[str, Any]:
    return {
        "path": "/healthz",
        "port": "probes",
        "httpHeaders": [{"name": "Host", "value": "localhost"}],
    }


def _adapter_container(image: str, records: str | None) -> dict[str, Any]:
    """The adapter's container: its command, probes, resources, mounts and drain."""
    return {
        "name": "adapter",
        "image": image,
        "command": ["slackwise", "serve", "-c", f"{CONFIG_DIR}/{CONFIG_FILE}"],
        # the functions are Knative Services in this namespace, read with the RBAC below
        "args": _adapter_args(),
        "ports": [
            {"name": "http", "containerPort": ADAPTER_PORT},
            {"name": "probes", "containerPort": ADAPTER_PROBE_PORT},
        ],
        # the probes have a port and a thread of their own: a flood of predicts never makes the
        # adapter look dead (the kubelet would restart it when it is busiest); the probe port
        # admits loopback Host names only (DNS rebinding), so the kubelet says localhost
        "readinessProbe": {"httpGet": _probe_get(), "periodSeconds": 5},
        "livenessProbe": {
            "httpGet": _probe_get(),
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        # the adapter is one event loop: one core is what it can use; the memory holds queues
        # of up to adapter.max_queue requests per function
        "resources": {
            "requests": {"cpu": "500m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            *({"name": name, "mountPath": path} for name, path in _writable(records)),
        ],
        # nothing in the image changes at run time: what it writes goes to emptyDirs
        "securityContext": {**container_security(), "readOnlyRootFilesystem": True},
        # the endpoint leaves the Service while the pod still answers; then SIGTERM: the adapter
        # keeps listening, answers new requests 503 + Retry-After, finishes what is in flight
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRE_STOP_S)]}}},
    }


def _adapter_pod(image: str, records: str | None, selector: dict[str, str]) -> dict[str, Any]:
    """The adapter's pod spec: its service account, spread over nodes, non-root, its volumes."""
    return {
        "serviceAccountName": ADAPTER_NAME,
        # the replicas on different nodes where there are (a node's loss
        # leaves one serving), without refusing to schedule where there are not
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(selector)},
            }
        ],
        "terminationGracePeriodSeconds": PRE_STOP_S + DRAIN_S + 5,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
        },
        "containers": [_adapter_container(image, records)],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{ADAPTER_NAME}-config"}},
            *({"name": name, "emptyDir": {}} for name, _ in _writable(records)),
        ],
    }


def _adapter_deployment(
    config_text: str,
    image: str,
    records: str | None,
    metadata: dict[str, Any],
    labels: dict[str, str],
    selector: dict[str, str],
) -> dict[str, Any]:
    """The adapter's Deployment, its pods annotated with the config's digest."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        # no spec.replicas: the HPA owns the count (an applied one would reset it every apply)
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                # the config's digest: a changed config rolls the adapter's pods
                "metadata": {
                    "labels": dict(labels),
                    "annotations": {
                        **SCRAPE,
                        CONFIG_DIGEST: hashlib.sha256(config_text.encode()).hexdigest(),
                    },
                },
                "spec": _adapter_pod(image, records, selector),
            },
        },
    }


def adapter_objects(
    config_text: str,
    *,
    image: str = ADAPTER_IMAGE,
    namespace: str | None = None,
    records: str | None = None,
    hpa: HpaSettings | None = None,
) -> list[dict[str, Any]]:
    """ConfigMap (the config file), Deployment, ClusterIP Service, PodDisruptionBudget and
    HorizontalPodAutoscaler of the adapter: ``hpa.min_replicas`` (two) to ``hpa.max_replicas``
    replicas scaled on their CPU (each counts the others through the functions' gossip, so
    their capacity shares agree), requests and limits, readiness and liveness on ``/healthz``,
    and at most one replica away at a time in a voluntary disruption (a node drain)."""
    labels = {**PART_OF, "app.kubernetes.io/name": ADAPTER_NAME}
    selector = {"app.kubernetes.io/name": ADAPTER_NAME}
    metadata = _metadata(ADAPTER_NAME, namespace, labels)
    deployment = _adapter_deployment(config_text, image, records, metadata, labels, selector)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {CONFIG_FILE: config_text},
        "metadata": _metadata(f"{ADAPTER_NAME}-config", namespace, labels),
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(ADAPTER_NAME, namespace, labels),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    }
    at_most_one_away = {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}}
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(ADAPTER_NAME, namespace, labels),
        "spec": at_most_one_away,
    }
    return [config_map, deployment, service, budget, adapter_hpa(deployment, hpa)]
