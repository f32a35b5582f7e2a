"""The ``kn service create`` line equivalent to one generated Knative Service manifest.

Built from the manifest itself (not from the config), so the line and the YAML cannot drift:
autoscaling annotations that ``kn`` has a flag for become ``--scale-*`` flags (where ``kn``'s
flag can hold the value: ``--scale-target`` and ``--scale-utilization`` take integers, so 2.5
goes to ``--annotation-revision`` instead), the rest go to ``--annotation-revision``;
containerConcurrency, timeoutSeconds, resources, node selector, tolerations, the readiness
probe (``http:HOST:PORT:PATH``, kn's format), the security context (``--security-context
strict``, written out because current kn defaults to none), env, command and args map to their
flags. :mod:`knative.cluster.kn_rules` checks a line against kn's own flag rules.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from slackwise_core.scaling_values import GROUP

#: autoscaling annotations (without the group) that ``kn`` sets with a flag of its own
SCALE_FLAGS = {
    "min-scale": "--scale-min",
    "max-scale": "--scale-max",
    "target": "--scale-target",
    "metric": "--scale-metric",
    "window": "--scale-window",
    "initial-scale": "--scale-init",
    "target-utilization-percentage": "--scale-utilization",
}


#: scale flags that kn parses as integers
INTEGER_SCALE = frozenset(
    {"min-scale", "max-scale", "target", "initial-scale", "target-utilization-percentage"}
)


def _is_int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _pairs(flag: str, data: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        out += [flag, f"{key}={value}"]
    return out


def _toleration(tol: Mapping[str, Any]) -> str:
    names = (
        ("key", "Key"),
        ("operator", "Operator"),
        ("value", "Value"),
        ("effect", "Effect"),
        ("tolerationSeconds", "TolerationSeconds"),
    )
    return ",".join(f"{label}={tol[k]}" for k, label in names if k in tol)


def kn_create_args(manifest: Mapping[str, Any]) -> list[str]:
    """``kn service create`` as an argument list for a manifest from
    :mod:`knative.cluster.manifests`."""
    meta = manifest["metadata"]
    template = manifest["spec"]["template"]
    pod = template["spec"]
    container = pod["containers"][0]
    args = ["kn", "service", "create", str(meta["name"])]
    if meta.get("namespace"):
        args += ["--namespace", str(meta["namespace"])]
    args += ["--image", str(container["image"])]
    annotations: Mapping[str, str] = template.get("metadata", {}).get("annotations", {})
    rest: dict[str, str] = {}
    for key, value in annotations.items():
        short = key[len(GROUP) + 1 :] if key.startswith(GROUP + "/") else None
        if short in SCALE_FLAGS and (short not in INTEGER_SCALE or _is_int(value)):
            args += [SCALE_FLAGS[short], value]
        else:
            rest[key] = value
    if "containerConcurrency" in pod:
        args += ["--concurrency-limit", str(pod["containerConcurrency"])]
    if "timeoutSeconds" in pod:
        args += ["--timeout", str(pod["timeoutSeconds"])]
    resources = container.get("resources", {})
    args += _pairs("--request", resources.get("requests", {}))
    args += _pairs("--limit", resources.get("limits", {}))
    args += _pairs("--node-selector", pod.get("nodeSelector", {}))
    for tol in pod.get("tolerations", ()):
        args += ["--toleration", _toleration(tol)]
    port = container.get("ports", [{}])[0].get("containerPort")
    if port is not None:
        args += ["--port", str(port)]
    probe = container.get("readinessProbe", {}).get("httpGet")
    if probe is not None:  # kn: http:HOST:PORT:PATH, empty host and port for the defaults
        scheme = str(probe.get("scheme", "HTTP")).lower()
        probe_port = probe.get("port", "")
        args += ["--probe-readiness", f"{scheme}::{probe_port}:{probe['path']}"]
    if container.get("securityContext"):
        args += ["--security-context", "strict"]
    args += _pairs("--annotation-revision", rest)
    for env in container.get("env", ()):
        args += ["--env", f"{env['name']}={env['value']}"]
    command = [str(part) for part in container.get("command", ())]
    if command:
        args += ["--cmd", command[0]]
    # ``--arg=VALUE``: the values start with dashes themselves
    args += [f"--arg={part}" for part in [*command[1:], *container.get("args", ())]]
    return args


def kn_create_line(manifest: Mapping[str, Any]) -> str:
    """The same, quoted for a POSIX shell."""
    return shlex.join(kn_create_args(manifest))
