"""Kubernetes manifests for a config: one Knative Service per function, plus the adapter.

``slackwise manifests -c CONFIG -o DIR`` writes numbered YAML files so that
``kubectl apply -f DIR`` deploys everything into the current namespace (or ``--namespace``):

- ``00-rbac.yaml``: the adapter's ServiceAccount, a least-privilege Role (read Knative Services,
  Revisions and Routes; patch Revisions, where the advisor sets min-scale; list pods and patch
  their ``resize`` subresource, where ROMA's controller sets cores) and the RoleBinding;
- ``10-function-NAME.yaml``: a ``serving.knative.dev/v1`` Service per configured function;
- ``20-adapter.yaml`` (:mod:`knative.cluster.adapter_manifests`): a ConfigMap with the config
  file, the adapter Deployment (non-root), a ClusterIP Service in front of it, a
  PodDisruptionBudget and a HorizontalPodAutoscaler on the adapters' CPU (``adapter.hpa``;
  :mod:`knative.cluster.hpa`, which also checks it).

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

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from functions.profiles import memory_mib
from knative.cluster.adapter_manifests import adapter_objects
from knative.cluster.crd_schema import (
    API_VERSION,
    KIND,
    KnativeSchemaMissing,
    ManifestError,
    service_schema,
    validate_service,
)
from knative.cluster.dashboard import dashboard_configmap
from knative.cluster.hpa import validate_hpa
from knative.cluster.images import Images, container_security, function_image
from knative.cluster.kn_commands import kn_create_line
from knative.cluster.network_policy import function_network_policy
from knative.cluster.rbac_manifests import ADAPTER_NAME, PART_OF, _metadata, rbac_objects
from slackwise_config import Config, FunctionConfig
from slackwise_core.knative_scaling import AutoscalerConfig

FUNCTION_PORT = 8080
GPU_RESOURCE = "nvidia.com/gpu"
#: the label NVIDIA's GPU feature discovery puts on GPU nodes
GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
GPU_TOLERATIONS = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: the kustomize base beside the files (``kubectl apply -k DIR``)
KUSTOMIZATION = "kustomization.yaml"
#: Knative's label for a Service only the cluster reaches (no route through the public ingress)
CLUSTER_LOCAL = {"networking.knative.dev/visibility": "cluster-local"}


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
        "securityContext": container_security(),
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
                service,
                function=fn.name,
                autoscaler=config.platform.autoscaler,
                directory=knative,
                schema_required=schema_required,
            )
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
    served = [fn.service for fn in config.functions.values() if fn.model and not fn.upstream.url]
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
