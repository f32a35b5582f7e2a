"""Kubernetes manifests for a config: one Knative Service per function, plus the adapter.

``slackwise manifests -c CONFIG -o DIR`` writes numbered YAML files so that
``kubectl apply -f DIR`` deploys everything into the current namespace (or ``--namespace``):

- ``00-rbac.yaml``: the adapter's ServiceAccount, a least-privilege Role (read Knative Services,
  Revisions and Routes; patch Revisions, where the advisor sets min-scale; list pods and patch
  their ``resize`` subresource, where ROMA's controller sets cores) and the RoleBinding;
- ``10-function-NAME.yaml``: a ``serving.knative.dev/v1`` Service per configured function;
- ``20-adapter.yaml``: a ConfigMap with the config file, the adapter Deployment (non-root), a
  ClusterIP Service in front of it, a PodDisruptionBudget and a HorizontalPodAutoscaler on the
  adapters' CPU (``adapter.hpa``; :mod:`knative.cluster.hpa`, which also checks it).

Every Knative Service is checked with :mod:`knative.cluster.crd_schema` before anything is written,
and
the equivalent ``kn service create`` line is printed per function
(:mod:`knative.cluster.kn_commands`).

A function container runs what the local platform runs, ``python -m functions.serve --model KIND
--name NAME --host 0.0.0.0``; the port comes from ``$PORT``, which Knative sets to the declared
containerPort. ``threads`` sets ``--threads`` and the BLAS/OpenMP thread variables, and a CPU
request of that many cores when the config names none. GPU variants get one
``nvidia.com/gpu``, a node selector and a toleration, which need config-features flags.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from functions.profiles import memory_mib
from knative.cluster.crd_schema import (
    API_VERSION,
    KIND,
    KnativeSchemaMissing,
    ManifestError,
    service_schema,
    validate_service,
)
from knative.cluster.dashboard import dashboard_configmap
from knative.cluster.hpa import adapter_hpa, validate_hpa
from knative.cluster.kn_commands import kn_create_line
from knative.cluster.network_policy import function_network_policy
from knative.cluster.rbac_manifests import ADAPTER_NAME, PART_OF, _metadata, rbac_objects
from slackwise_core.config import Config, FunctionConfig, HpaSettings
from slackwise_core.knative_scaling import AutoscalerConfig

VERSION = "0.1.0"
FUNCTION_PORT = 8080
ADAPTER_IMAGE = f"slackwise/adapter:{VERSION}"
ADAPTER_PORT = 8080
#: the adapter's probe port (adapter.serving.probe_port): health and status from a thread
ADAPTER_PROBE_PORT = 8081
CONFIG_DIR = "/etc/slackwise"
CONFIG_FILE = "config.yaml"
#: the uid of the ``slackwise`` user in adapter/Dockerfile and functions/Dockerfile.base
RUN_AS_USER = 10001
#: seconds the pod keeps serving after it left the Service's endpoints (preStop), and the
#: adapter's own drain after SIGTERM (in-flight batches finish within it)
PRE_STOP_S = 5
DRAIN_S = 10
GPU_RESOURCE = "nvidia.com/gpu"
#: the label NVIDIA's GPU feature discovery puts on GPU nodes
GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
GPU_TOLERATIONS = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: the adapter pod's annotation holding its config's SHA-256
CONFIG_DIGEST = "slackwise.dev/config-sha256"
#: the kustomize base beside the files (``kubectl apply -k DIR``)
KUSTOMIZATION = "kustomization.yaml"
#: Knative's label for a Service only the cluster reaches (no route through the public ingress)
CLUSTER_LOCAL = {"networking.knative.dev/visibility": "cluster-local"}
#: Prometheus's scrape annotations on the adapter's pods (GET /metrics on its port)
SCRAPE = {"prometheus.io/scrape": "true", "prometheus.io/port": str(ADAPTER_PORT),
          "prometheus.io/path": "/metrics"}  # fmt: skip


@dataclass(frozen=True)
class Images:
    """Where the images the manifests name live: ``registry`` replaces the ``slackwise``
    repository prefix (``ghcr.io/me`` -> ``ghcr.io/me/embed:TAG``), ``tag`` the version."""

    registry: str = "slackwise"
    tag: str = VERSION

    def name(self, image: str) -> str:
        return f"{self.registry.rstrip('/')}/{image}:{self.tag}"


def function_image(fn: FunctionConfig, images: Images | None = None) -> str:
    """The configured image, else ``slackwise/<model>:<version>``, or for a function computing
    on a GPU ``slackwise/<model>-gpu:<version>`` (``functions/<model>/Dockerfile.gpu``: the
    CUDA builds; the plain images carry the CPU builds); ``images`` moves the default ones."""
    if fn.image:
        return fn.image
    suffix = "" if fn.device == "cpu" else "-gpu"
    return (images or Images()).name(f"{fn.model}{suffix}")


def _container_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def function_service(
    fn: FunctionConfig, namespace: str | None = None, images: Images | None = None
) -> dict[str, Any]:
    """The Knative Service for one function (not yet validated): reachable inside the cluster
    only (``networking.knative.dev/visibility: cluster-local``; the adapter is its front)."""
    labels = {
        **PART_OF,
        "app.kubernetes.io/name": fn.name,
        "app.kubernetes.io/component": "function",
    }
    requests = dict(fn.resources.requests)
    limits = dict(fn.resources.limits)
    requests.setdefault("cpu", str(fn.threads))
    measured = memory_mib(fn.model) if fn.model else None
    if measured is not None:  # the measured peak and a quarter; the limit, twice that
        request_mib = math.ceil(measured * 1.25 / 16) * 16
        requests.setdefault("memory", f"{request_mib}Mi")
        limits.setdefault("memory", f"{2 * request_mib}Mi")
    if fn.variant == "gpu":
        limits.setdefault(GPU_RESOURCE, "1")
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    serve_args = ["--model", fn.model, "--name", fn.name, "--host", "0.0.0.0"]
    serve_args += ["--threads", str(fn.threads)]
    if fn.device != "cpu":  # the GPU is used, or the function refuses to start
        serve_args += ["--device", fn.device]
    container: dict[str, Any] = {
        "name": "function",
        "image": function_image(fn, images),
        "command": ["python", "-m", "functions.serve"],
        "args": serve_args,
        "ports": [{"name": "http1", "containerPort": FUNCTION_PORT}],
        "env": [{"name": var, "value": str(fn.threads)} for var in THREAD_VARIABLES],
        "resources": resources,
        "readinessProbe": {"httpGet": {"path": f"/v1/models/{fn.name}"}},
        "securityContext": _container_security(),
    }
    pod: dict[str, Any] = {
        "containerConcurrency": fn.container_concurrency,
        "timeoutSeconds": fn.timeout_s,
        "containers": [container],
    }
    if fn.variant == "gpu":
        pod["nodeSelector"] = dict(GPU_NODE_SELECTOR)
        pod["tolerations"] = [dict(t) for t in GPU_TOLERATIONS]
    template_meta: dict[str, Any] = {"labels": dict(labels)}
    if fn.annotations:
        template_meta["annotations"] = {k: str(v) for k, v in fn.annotations.items()}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": _metadata(fn.name, namespace, {**labels, **CLUSTER_LOCAL}),
        "spec": {"template": {"metadata": template_meta, "spec": pod}},
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
        "securityContext": {**_container_security(), "readOnlyRootFilesystem": True},
        # the endpoint leaves the Service while the pod still answers; then SIGTERM: the adapter
        # keeps listening, answers new requests 503 + Retry-After, finishes what is in flight
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRE_STOP_S)]}}},
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
    container = _adapter_container(image, records)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(ADAPTER_NAME, namespace, labels),
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
                "spec": {
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
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": f"{ADAPTER_NAME}-config"}},
                        *({"name": name, "emptyDir": {}} for name, _ in _writable(records)),
                    ],
                },
            },
        },
    }
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "data": {CONFIG_FILE: config_text},
                  "metadata": _metadata(f"{ADAPTER_NAME}-config", namespace, labels)}  # fmt: skip
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": _metadata(ADAPTER_NAME, namespace, labels),
               "spec": {"type": "ClusterIP", "selector": selector,
                        "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}  # fmt: skip
    at_most_one_away = {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}}
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": _metadata(ADAPTER_NAME, namespace, labels),
              "spec": at_most_one_away}  # fmt: skip
    return [config_map, deployment, service, budget, adapter_hpa(deployment, hpa)]


@dataclass
class Bundle:
    """What ``slackwise manifests`` writes: files of objects, their header comments, and more."""

    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    kn_lines: list[str] = field(default_factory=list)


def build(
    config: Config,
    config_text: str,
    *,
    adapter_image: str | None = None,
    namespace: str | None = None,
    knative: Path | None = None,
    schema_required: bool = True,
    images: Images | None = None,
) -> Bundle:
    """All manifests for ``config``; every Knative Service is validated (ManifestError): against
    the Serving CRD's schema and the webhook's rules, or, when the CRD is not found and
    ``schema_required`` is off, the webhook's rules alone (with a warning saying so)."""
    bundle = Bundle()
    if not schema_required:
        try:
            service_schema(knative)
        except KnativeSchemaMissing as exc:
            bundle.warnings.append(
                f"{exc}: the Services were checked by Knative's webhook rules only; for the "
                "strict schema check point --knative-dir or SLACKWISE_KNATIVE_DIR at a "
                "directory with Knative Serving's service.yaml"
            )
    bundle.files["00-rbac.yaml"] = rbac_objects(namespace)
    errors: list[str] = []
    if config.platform.autoscaler != AutoscalerConfig():
        bundle.warnings.append(
            f"{config.source}: platform.autoscaler sets config-autoscaler keys for the local "
            "platform; on a cluster they live in the config-autoscaler ConfigMap of the "
            "knative-serving namespace, which these manifests do not change"
        )
    for fn in config.functions.values():
        if not fn.model or fn.upstream.url:  # served by another system: nothing of ours to run
            bundle.warnings.append(
                f"{fn.name}: served by another system ({fn.upstream.url or fn.service}); no "
                "Knative Service written for it"
            )
            continue
        service = function_service(fn, namespace, images)
        try:
            warnings = validate_service(
                service, function=fn.name, autoscaler=config.platform.autoscaler,
                directory=knative, schema_required=schema_required,
            )  # fmt: skip
        except ManifestError as exc:
            errors.append(str(exc))
            continue
        name = f"10-function-{fn.name}.yaml"
        bundle.files[name] = [service]
        bundle.comments[name] = [f"warning: {w}" for w in warnings]
        bundle.warnings.extend(warnings)
        bundle.kn_lines.append(kn_create_line(service))
    if errors:
        raise ManifestError("\n".join(errors))
    adapter = adapter_objects(
        config_text,
        image=adapter_image or (images or Images()).name("adapter"),
        namespace=namespace,
        records=config.adapter.records,
        hpa=config.adapter.hpa,
    )
    for obj in adapter:
        if obj["kind"] == "HorizontalPodAutoscaler":
            validate_hpa(obj, adapter)
    bundle.files["20-adapter.yaml"] = adapter
    served = [fn.service for fn in config.functions.values()
              if fn.model and not fn.upstream.url]  # fmt: skip
    if served:
        adapter_pods = {"app.kubernetes.io/name": ADAPTER_NAME}
        bundle.files["30-network-policy.yaml"] = [
            function_network_policy(served, adapter_pods, namespace=namespace)
        ]
    bundle.files["40-grafana-dashboard.yaml"] = [dashboard_configmap(namespace, dict(PART_OF))]
    return bundle


def kustomization(bundle: Bundle) -> dict[str, Any]:
    """A kustomize base of the bundle's files (overlays set images, namespace, replicas)."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(bundle.files),
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the config file in the ConfigMap) as ``|`` blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render(objects: list[dict[str, Any]], comments: list[str] | None = None) -> str:
    """One multi-document YAML text, with ``#`` comment lines first."""
    head = "".join(f"# {line}\n" for line in comments or ())
    docs = [
        yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False) for obj in objects
    ]
    return head + "---\n".join(docs)
