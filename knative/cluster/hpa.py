"""The adapter's HorizontalPodAutoscaler (``autoscaling/v2``, on CPU) and its structural check.

Written into ``20-adapter.yaml`` beside the Deployment it scales, from ``adapter.hpa``
(:mod:`slackwise_config.hpa`): between ``min_replicas`` and ``max_replicas`` adapters, at
``target_cpu_percent`` of their CPU request on average. It scales up at once (no stabilization
window; each 15 s doubles the adapters or adds four, whichever is more, as Kubernetes does by
default) so a flash crowd gets adapters while it lasts, and down after 300 s of less load
(Kubernetes' default window), so a lull between bursts keeps them.

The Deployment carries no ``spec.replicas``: the HPA owns the count, and a ``kubectl apply``
of a manifest naming one would set it back on every apply (Kubernetes' advice for workloads an
HPA scales). :func:`validate_hpa` checks what the API server and the HPA controller would refuse
or silently ignore: the fields, the bounds, a CPU Utilization target the pods can reach, and a
target Deployment in the same bundle whose containers request CPU (utilization is measured
against the request; without one the HPA cannot compute it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from knative.cluster.crd_schema import ManifestError, nested
from slackwise_config.hpa import HpaSettings

__all__ = ["HPA_API_VERSION", "adapter_hpa", "cpu_cores", "validate_hpa"]

HPA_API_VERSION = "autoscaling/v2"
HPA_KIND = "HorizontalPodAutoscaler"
#: Kubernetes' default scale-down stabilization window (kube-controller-manager's
#: --horizontal-pod-autoscaler-downscale-stabilization)
SCALE_DOWN_WINDOW_S = 300
#: the most stabilizationWindowSeconds the API server accepts (one hour)
MAX_WINDOW_S = 3600
#: the most periodSeconds a scaling policy may have (30 minutes)
MAX_PERIOD_S = 1800
_SPEC_KEYS = frozenset({"scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior"})
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m?)$")


def adapter_hpa(
    deployment: Mapping[str, Any], settings: HpaSettings | None = None
) -> dict[str, Any]:
    """The HPA over ``deployment`` (its name, namespace and labels), from ``settings``."""
    s = settings or HpaSettings()
    meta = deployment["metadata"]
    metadata: dict[str, Any] = {"name": meta["name"]}
    if meta.get("namespace"):
        metadata["namespace"] = meta["namespace"]
    metadata["labels"] = dict(meta.get("labels") or {})
    return {
        "apiVersion": HPA_API_VERSION,
        "kind": HPA_KIND,
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {
                "apiVersion": deployment["apiVersion"],
                "kind": deployment["kind"],
                "name": meta["name"],
            },
            "minReplicas": s.min_replicas,
            "maxReplicas": s.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {
                            "type": "Utilization",
                            "averageUtilization": s.target_cpu_percent,
                        },
                    },
                }
            ],
            "behavior": {
                "scaleUp": {
                    "stabilizationWindowSeconds": 0,
                    "selectPolicy": "Max",
                    "policies": [
                        {"type": "Percent", "value": 100, "periodSeconds": 15},
                        {"type": "Pods", "value": 4, "periodSeconds": 15},
                    ],
                },
                "scaleDown": {
                    "stabilizationWindowSeconds": SCALE_DOWN_WINDOW_S,
                    "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
                },
            },
        },
    }


def cpu_cores(quantity: Any) -> float | None:
    """A CPU quantity (``"500m"``, ``"1"``, ``2``, ``"0.5"``) in cores; None when unreadable."""
    if isinstance(quantity, bool):
        return None
    if isinstance(quantity, (int, float)):
        return float(quantity)
    match = _QUANTITY.match(str(quantity))
    if match is None:
        return None
    value = float(match[1])
    return value / 1000 if match[2] else value


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _target(hpa: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """The scale target: named in full, and a Deployment of ``objects`` in the same namespace."""
    ref = nested(hpa, "spec", "scaleTargetRef")
    if not isinstance(ref, Mapping):
        return [f"spec.scaleTargetRef: required, got {ref!r}"]
    errors = [
        f"spec.scaleTargetRef.{key}: required, got {ref.get(key)!r}"
        for key in ("apiVersion", "kind", "name")
        if not isinstance(ref.get(key), str) or not ref.get(key)
    ]
    if errors:
        return errors
    namespace = nested(hpa, "metadata", "namespace")
    for obj in objects:
        if (
            (obj.get("apiVersion"), obj.get("kind")) == (ref["apiVersion"], ref["kind"])
            and nested(obj, "metadata", "name") == ref["name"]
            and nested(obj, "metadata", "namespace") == namespace
        ):
            return _target_pods(hpa, obj)
    return [
        f"spec.scaleTargetRef: no {ref['kind']} {ref['name']!r} ({ref['apiVersion']}) "
        "in the same manifests and namespace to scale"
    ]


def _target_pods(hpa: Mapping[str, Any], target: Mapping[str, Any]) -> list[str]:
    """Every container of the target requests CPU (else no utilization), a target the pods can
    reach under their limit, and no ``spec.replicas`` to fight the HPA on every apply."""
    errors: list[str] = []
    name = f"target {target.get('kind')}/{nested(target, 'metadata', 'name')}"
    replicas = nested(target, "spec", "replicas")
    if replicas is not None and replicas != nested(hpa, "spec", "minReplicas"):
        errors.append(
            f"{name}: spec.replicas {replicas!r} would set the HPA's count back on every "
            "kubectl apply; leave it out (or equal to minReplicas)"
        )
    containers = nested(target, "spec", "template", "spec", "containers")
    if not isinstance(containers, list) or not containers:
        return [*errors, f"{name}: spec.template.spec.containers: no pods to scale"]
    requests, limits = [], []
    for i, container in enumerate(containers):
        asked = nested(container, "resources", "requests", "cpu")
        request = cpu_cores(asked)
        if not request:
            errors.append(
                f"{name}: spec.template.spec.containers[{i}].resources.requests.cpu: required "
                f"for a CPU Utilization target (measured against the request), got {asked!r}"
            )
        requests.append(request or 0.0)
        limits.append(cpu_cores(nested(container, "resources", "limits", "cpu")))
    if errors or None in limits:  # no limit: no ceiling on the utilization the pods reach
        return errors
    # the HPA's utilization: the pod's CPU use over the sum of its containers' requests
    reachable = sum(x or 0.0 for x in limits) / sum(requests) * 100
    metrics = nested(hpa, "spec", "metrics")
    for i, metric in enumerate(metrics if isinstance(metrics, list) else ()):
        value = nested(metric, "resource", "target", "averageUtilization")
        if _is_int(value) and value > reachable:
            errors.append(
                f"spec.metrics[{i}].resource.target.averageUtilization: {value} is more than "
                f"the pods can reach ({name}: limits.cpu = {reachable:g} % of requests.cpu), "
                "so it never scales up"
            )
    return errors


def _metric_errors(metrics: Any) -> list[str]:
    if not isinstance(metrics, list) or not metrics:
        return [f"spec.metrics: at least one metric, got {metrics!r}"]
    errors = []
    for i, metric in enumerate(metrics):
        where = f"spec.metrics[{i}]"
        if not isinstance(metric, Mapping) or metric.get("type") != "Resource":
            got = metric.get("type") if isinstance(metric, Mapping) else metric
            errors.append(f"{where}.type: must be Resource (the pods' CPU), got {got!r}")
            continue
        name, kind = (
            nested(metric, "resource", "name"),
            nested(metric, "resource", "target", "type"),
        )
        if name != "cpu":
            errors.append(f"{where}.resource.name: must be cpu, got {name!r}")
        if kind != "Utilization":
            errors.append(f"{where}.resource.target.type: must be Utilization, got {kind!r}")
        value = nested(metric, "resource", "target", "averageUtilization")
        if not _is_int(value) or value < 1:
            errors.append(
                f"{where}.resource.target.averageUtilization: must be an integer percentage "
                f">= 1, got {value!r}"
            )
    return errors


def _behavior_errors(behavior: Any) -> list[str]:
    if behavior is None:
        return []
    if not isinstance(behavior, Mapping):
        return [f"spec.behavior: must be a mapping, got {behavior!r}"]
    errors = []
    for direction in sorted(set(behavior) - {"scaleUp", "scaleDown"}):
        errors.append(f"spec.behavior.{direction}: unknown field (known: scaleDown, scaleUp)")
    for direction in ("scaleUp", "scaleDown"):
        rules = behavior.get(direction) or {}
        where = f"spec.behavior.{direction}"
        if not isinstance(rules, Mapping):
            errors.append(f"{where}: must be a mapping, got {rules!r}")
            continue
        window = rules.get("stabilizationWindowSeconds", 0)
        if not _is_int(window) or not 0 <= window <= MAX_WINDOW_S:
            errors.append(
                f"{where}.stabilizationWindowSeconds: must be within [0, {MAX_WINDOW_S}], "
                f"got {window!r}"
            )
        if rules.get("selectPolicy", "Max") not in ("Max", "Min", "Disabled"):
            errors.append(
                f"{where}.selectPolicy: must be Max, Min or Disabled, "
                f"got {rules.get('selectPolicy')!r}"
            )
        for j, policy in enumerate(rules.get("policies") or ()):
            kind, value, period = (nested(policy, k) for k in ("type", "value", "periodSeconds"))
            if kind not in ("Pods", "Percent"):
                errors.append(f"{where}.policies[{j}].type: must be Pods or Percent, got {kind!r}")
            if not _is_int(value) or value < 1:
                errors.append(f"{where}.policies[{j}].value: must be >= 1, got {value!r}")
            if not _is_int(period) or not 0 < period <= MAX_PERIOD_S:
                errors.append(
                    f"{where}.policies[{j}].periodSeconds: must be within [1, {MAX_PERIOD_S}], "
                    f"got {period!r}"
                )
    return errors


def validate_hpa(hpa: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> None:
    """Check one HPA against the objects applied with it; raise :class:`ManifestError` naming
    every problem (``HorizontalPodAutoscaler/NAME: path: reason, got value``)."""
    errors: list[str] = []
    if hpa.get("apiVersion") != HPA_API_VERSION:
        errors.append(f"apiVersion: must be {HPA_API_VERSION}, got {hpa.get('apiVersion')!r}")
    if hpa.get("kind") != HPA_KIND:
        errors.append(f"kind: must be {HPA_KIND}, got {hpa.get('kind')!r}")
    spec = hpa.get("spec")
    if not isinstance(spec, Mapping):
        errors.append(f"spec: required, got {spec!r}")
        spec = {}
    errors.extend(
        f"spec.{key}: unknown field (known: {', '.join(sorted(_SPEC_KEYS))})"
        for key in sorted(set(spec) - _SPEC_KEYS)
    )
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if not _is_int(low) or low < 1:
        errors.append(f"spec.minReplicas: must be an integer >= 1, got {low!r}")
    if not _is_int(high) or high < 1:
        errors.append(f"spec.maxReplicas: required, an integer >= 1, got {high!r}")
    elif _is_int(low) and high < low:
        errors.append(f"spec.maxReplicas: must be >= minReplicas ({low}), got {high}")
    errors.extend(_metric_errors(spec.get("metrics")))
    errors.extend(_behavior_errors(spec.get("behavior")))
    errors.extend(_target(hpa, objects))
    if errors:
        name = nested(hpa, "metadata", "name")
        raise ManifestError("\n".join(f"{HPA_KIND}/{name}: {line}" for line in errors))
