"""A strict check of Knative Service manifests against the Serving CRD's openAPIV3Schema.

The schema is read at run time from ``shared/knative/service.yaml`` (Knative Serving 1.23), found
next to the repository (``../shared/knative``) or in ``$SLACKWISE_KNATIVE_DIR``. The validator
covers the subset of OpenAPI v3 that the CRD uses: ``type``, ``format`` (int32/int64 ranges),
``properties``, ``additionalProperties``, ``items``, ``required``, ``enum``, ``pattern``,
``anyOf``, ``x-kubernetes-int-or-string``, ``x-kubernetes-list-type`` (set / map uniqueness) and
``x-kubernetes-preserve-unknown-fields``. It is stricter than the API server: a field that the
schema does not declare is an error wherever unknown fields are not explicitly preserved (the API
server would prune it silently).

:func:`validate_service` adds the admission webhook's value rules that the schema cannot express
(autoscaling annotations through :func:`slackwise_core.knative_scaling.resolve_spec`,
containerConcurrency, timeoutSeconds, ports) and returns the feature-flag warnings. Every error
names the function, the JSON path and the value, e.g.
``digits: spec.template.spec.containerConcurrency: must be within [0, 1000], got 5000``.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from knative.errors import PlatformError
from slackwise_core.knative_scaling import AutoscalerConfig, resolve_spec
from slackwise_core.scaling_values import GROUP, ScalingConfigError

API_VERSION = "serving.knative.dev/v1"
KIND = "Service"
#: ports the queue-proxy and the mesh use inside every Knative pod (the webhook refuses them)
RESERVED_PORTS = frozenset({8012, 8013, 8022, 9090, 9091, 8008})
CONTAINER_CONCURRENCY_MAX = 1000
#: config-defaults max-revision-timeout-seconds (Knative's default)
TIMEOUT_MAX_S = 600
#: pod spec fields gated by a config-features flag, and that flag
FEATURE_GATED = {
    "nodeSelector": "kubernetes.podspec-nodeselector",
    "tolerations": "kubernetes.podspec-tolerations",
    "affinity": "kubernetes.podspec-affinity",
    "runtimeClassName": "kubernetes.podspec-runtimeclassname",
    "securityContext": "kubernetes.podspec-securitycontext",
    "priorityClassName": "kubernetes.podspec-priorityclassname",
    "schedulerName": "kubernetes.podspec-schedulername",
    "hostAliases": "kubernetes.podspec-hostaliases",
    "initContainers": "kubernetes.podspec-init-containers",
    "topologySpreadConstraints": "kubernetes.podspec-topologyspreadconstraints",
    "dnsPolicy": "kubernetes.podspec-dnspolicy",
    "dnsConfig": "kubernetes.podspec-dnsconfig",
    "hostIPC": "kubernetes.podspec-hostipc",
    "hostNetwork": "kubernetes.podspec-hostnetwork",
    "hostPID": "kubernetes.podspec-hostpid",
    "shareProcessNamespace": "kubernetes.podspec-shareprocessnamespace",
}

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}

#: the root ``metadata`` is an ObjectMeta that the CRD leaves to the API server; these are the
#: ObjectMeta fields a client may set
_OBJECT_META: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
}


class ManifestError(PlatformError, ValueError):
    """A manifest the cluster would refuse (or silently change); the message says where."""


class KnativeSchemaMissing(ManifestError):
    """The Knative CRD files are not where they are looked for."""


def knative_dir() -> Path:
    """Where the Knative 1.23 CRDs and config maps are: $SLACKWISE_KNATIVE_DIR, else
    ``../shared/knative`` from the working directory or from this checkout, the first that
    holds a ``service.yaml`` (the checkout's when none does, for the error message)."""
    env = os.environ.get("SLACKWISE_KNATIVE_DIR")
    if env:
        return Path(env)
    beside_checkout = Path(__file__).resolve().parents[3] / "shared" / "knative"
    for candidate in (Path.cwd().parent / "shared" / "knative", beside_checkout):
        if (candidate / "service.yaml").is_file():
            return candidate
    return beside_checkout


@functools.lru_cache(maxsize=8)
def _load_schema(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KnativeSchemaMissing(
            f"{path}: cannot read the Knative Service CRD ({exc.strerror or exc}); "
            "put Knative Serving's service.yaml there or set SLACKWISE_KNATIVE_DIR"
        ) from None
    crd = yaml.safe_load(text)
    try:
        for version in crd["spec"]["versions"]:
            if version["name"] == "v1":
                schema = version["schema"]["openAPIV3Schema"]
                if isinstance(schema, dict):
                    return schema
    except (KeyError, TypeError):
        pass
    raise KnativeSchemaMissing(f"{path}: no v1 openAPIV3Schema in this CRD")


def service_schema(directory: Path | None = None) -> dict[str, Any]:
    """The v1 openAPIV3Schema of the Knative Service CRD."""
    return _load_schema((directory or knative_dir()) / "service.yaml")


def feature_flags(directory: Path | None = None) -> dict[str, str]:
    """config-features ``data`` from the shipped features.yaml; empty when it is absent."""
    path = (directory or knative_dir()) / "configmaps" / "features.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    flags = data.get("data") if isinstance(data, dict) else None
    if not isinstance(flags, dict):
        return {}
    return {str(k): str(v) for k, v in flags.items() if not str(k).startswith("_")}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return _is_int(value)
    if kind == "number":
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(float(value))
        )
    raise ManifestError(f"the CRD schema uses type {kind!r}, which this validator does not know")


def schema_errors(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every way ``value`` breaks ``schema``, as ``path: message, got value`` lines."""
    where = path or "(root)"
    if value is None:
        return [f"{where}: must not be null"]
    if schema.get("x-kubernetes-int-or-string"):
        if not (_type_ok(value, "integer") or isinstance(value, str)):
            return [f"{where}: must be an integer or a string, got {value!r}"]
    elif "anyOf" in schema:
        branches = schema["anyOf"]
        if not any(not schema_errors(value, branch, path) for branch in branches):
            kinds = " or ".join(str(b.get("type", "?")) for b in branches)
            return [f"{where}: must be {kinds}, got {value!r}"]
    kind = schema.get("type")
    if kind is not None and not _type_ok(value, kind):
        return [f"{where}: must be of type {kind}, got {value!r}"]
    errors: list[str] = []
    fmt = schema.get("format")
    if fmt in _INT_RANGES and _is_int(value):
        low, high = _INT_RANGES[fmt]
        if not low <= value <= high:
            errors.append(f"{where}: out of {fmt} range, got {value!r}")
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"])
        errors.append(f"{where}: must be one of {allowed}, got {value!r}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{where}: does not match {schema['pattern']}, got {value!r}")
    if isinstance(value, Mapping):
        errors.extend(_object_errors(value, schema, path))
    elif isinstance(value, list):
        errors.extend(_array_errors(value, schema, path))
    return errors


def _object_errors(value: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    props: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    for name in schema.get("required", ()):
        if name not in value:
            errors.append(f"{_join(path, name)}: required field is missing")
    for key, item in value.items():
        if not isinstance(key, str):
            errors.append(f"{path or '(root)'}: keys must be strings, got {key!r}")
            continue
        sub = _join(path, key)
        if key in props:
            errors.extend(schema_errors(item, props[key], sub))
        elif isinstance(extra, Mapping):
            errors.extend(schema_errors(item, extra, sub))
        elif not preserve:
            known = ", ".join(sorted(props)) or "none"
            errors.append(f"{sub}: unknown field (known: {known}), got {item!r}")
    return errors


def _array_errors(value: list[Any], schema: Mapping[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            errors.extend(schema_errors(item, items, f"{path}[{i}]"))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                errors.append(f"{path}[{i}]: duplicate entry in a set, got {item!r}")
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", ())
        seen_keys: list[tuple[Any, ...]] = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                continue
            ident = tuple(item.get(k) for k in keys)
            if ident in seen_keys:
                errors.append(f"{path}[{i}]: duplicate map-list key {ident!r}")
            seen_keys.append(ident)
    return errors


def _root_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The CRD schema with the root ObjectMeta spelled out (the CRD leaves it to the server)."""
    root = dict(schema)
    props = dict(root.get("properties", {}))
    props["metadata"] = _OBJECT_META
    root["properties"] = props
    root["required"] = sorted({*root.get("required", ()), "apiVersion", "kind", "metadata"})
    return root


def nested(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...``, None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _webhook_errors(manifest: Mapping[str, Any], autoscaler: AutoscalerConfig) -> list[str]:
    """The admission webhook's rules that the schema cannot express (as far as we check them)."""
    errors: list[str] = []
    if manifest.get("apiVersion") != API_VERSION:
        errors.append(f"apiVersion: must be {API_VERSION}, got {manifest.get('apiVersion')!r}")
    if manifest.get("kind") != KIND:
        errors.append(f"kind: must be {KIND}, got {manifest.get('kind')!r}")
    name = nested(manifest, "metadata", "name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name):
        errors.append(f"metadata.name: must be a DNS label (a-z, 0-9, '-'), got {name!r}")
    top = nested(manifest, "metadata", "annotations") or {}
    if isinstance(top, Mapping):
        for key in top:
            if isinstance(key, str) and key.startswith(GROUP + "/"):
                errors.append(
                    f"metadata.annotations.{key}: autoscaling annotations belong under "
                    f"spec.template.metadata.annotations, got {top[key]!r}"
                )
    pod = nested(manifest, "spec", "template", "spec")
    if not isinstance(pod, Mapping):
        return errors
    base = "spec.template.spec"
    cc = pod.get("containerConcurrency", 0)
    cc_ok = _is_int(cc) and 0 <= cc <= CONTAINER_CONCURRENCY_MAX
    if _is_int(cc) and not cc_ok:
        errors.append(
            f"{base}.containerConcurrency: must be within [0, {CONTAINER_CONCURRENCY_MAX}], "
            f"got {cc!r}"
        )
    timeout = pod.get("timeoutSeconds")
    if _is_int(timeout) and not 0 < timeout <= TIMEOUT_MAX_S:
        errors.append(
            f"{base}.timeoutSeconds: must be within [1, {TIMEOUT_MAX_S}] "
            f"(max-revision-timeout-seconds), got {timeout!r}"
        )
    annotations = nested(manifest, "spec", "template", "metadata", "annotations") or {}
    where = "spec.template.metadata.annotations"
    if isinstance(annotations, Mapping):
        bad = [k for k, v in annotations.items() if not isinstance(v, str)]
        for key in bad:
            errors.append(f"{where}.{key}: must be a string (quote it), got {annotations[key]!r}")
        if not bad and cc_ok:
            try:
                resolve_spec(annotations, container_concurrency=cc, config=autoscaler)
            except ScalingConfigError as exc:
                errors.append(f"{where}: {exc}")
    containers = pod.get("containers")
    if isinstance(containers, list):
        errors.extend(_container_errors(containers, f"{base}.containers"))
    return errors


def _container_errors(containers: Sequence[Any], base: str) -> list[str]:
    errors: list[str] = []
    if len(containers) != 1:
        errors.append(f"{base}: slackwise runs exactly one container, got {len(containers)}")
    ports: list[tuple[str, Any]] = []
    for i, container in enumerate(containers):
        if not isinstance(container, Mapping):
            continue
        if not container.get("image"):
            errors.append(f"{base}[{i}].image: required, got {container.get('image')!r}")
        for j, port in enumerate(container.get("ports") or ()):
            if isinstance(port, Mapping):
                ports.append((f"{base}[{i}].ports[{j}].containerPort", port.get("containerPort")))
    if len(ports) > 1:  # none is fine: Knative defaults the port to 8080
        errors.append(f"{base}: at most one container port, got {len(ports)}")
    for path, number in ports:
        if not _is_int(number) or not 0 < number < 65536:
            errors.append(f"{path}: must be a port number in [1, 65535], got {number!r}")
        elif number in RESERVED_PORTS:
            reserved = ", ".join(str(p) for p in sorted(RESERVED_PORTS))
            errors.append(f"{path}: port {number} is reserved by Knative ({reserved})")
    return errors


def validate_service(
    manifest: Mapping[str, Any],
    *,
    function: str,
    autoscaler: AutoscalerConfig | None = None,
    directory: Path | None = None,
    schema_required: bool = True,
) -> list[str]:
    """Check one Service manifest; raise :class:`ManifestError` naming every problem.

    Returns warnings: pod spec fields that need a config-features flag, with the flag's value
    in the shipped features.yaml. Without the CRD (:class:`KnativeSchemaMissing`) and with
    ``schema_required=False`` only the webhook's rules are checked.
    """
    try:
        errors = schema_errors(manifest, _root_schema(service_schema(directory)))
    except KnativeSchemaMissing:
        if schema_required:
            raise
        errors = []
    errors.extend(_webhook_errors(manifest, autoscaler or AutoscalerConfig()))
    if errors:
        raise ManifestError("\n".join(f"{function}: {line}" for line in errors))
    pod = nested(manifest, "spec", "template", "spec") or {}
    flags = feature_flags(directory)
    warnings = []
    for fieldname, flag in FEATURE_GATED.items():
        if fieldname in pod:
            state = flags.get(flag, "disabled")
            warnings.append(
                f"{function}: spec.template.spec.{fieldname} needs the {flag} feature flag "
                f"in config-features (knative-serving namespace); Knative's default is {state!r}"
            )
    return warnings
