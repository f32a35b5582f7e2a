"""CPU cores of a function's pods set in place: ROMA's actuation on Kubernetes.

ROMA's CT controller (:class:`slackwise_policies.roma.CoreController`) decides, every second, how
many cores each model's CPU executable gets. On the local platform that is a cgroup quota
(:meth:`knative.local.platform.LocalPlatform.set_cores`); on Kubernetes it is the pod's in-place
resize (``PATCH pods/{name}/resize``, Kubernetes >= 1.33): the container's CPU request (and its
limit, where it has one) change without a restart (a container's ``resizePolicy`` for cpu
defaults to ``NotRequired``), so a Knative revision keeps its pods, its queue-proxy and its warm
model. :meth:`PodCores.set_cores` gives a function's running pods ``cores`` between them, split
evenly, as the local platform's quota does for its replicas; pods that scale out later start
from the template's request and get their share on the controller's next tick.

What the RBAC needs (``slackwise manifests`` grants it): ``list`` on ``pods`` and ``patch`` on
``pods/resize`` in the namespace. The kubelet may defer a resize the node has no room for, or
refuse one larger than the node: each pod's result says which (``PodResizePending``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from knative.cluster.errors import KnativeError, api_error

__all__ = ["RESIZE_SINCE", "PodCores", "PodResize", "ResizeUnavailableError", "millicores"]

Obj = dict[str, Any]
#: in-place pod resize is on by default (beta) from this Kubernetes version
RESIZE_SINCE = (1, 33)
#: the container that runs the function (``knative.cluster.manifests``)
CONTAINER = "function"
SERVICE_LABEL = "serving.knative.dev/service"


class ResizeUnavailableError(KnativeError):
    """The cluster has no in-place pod resize."""

    def __init__(self, version: str) -> None:
        self.version = version
        need = ".".join(map(str, RESIZE_SINCE))
        super().__init__(
            f"in-place pod resize needs Kubernetes >= {need} (the pods/resize subresource); "
            f"this cluster runs {version}"
        )


def millicores(cores: float) -> str:
    """A CPU quantity for ``cores``: whole millicores, at least one."""
    if not (isinstance(cores, int | float) and math.isfinite(cores) and cores > 0):
        raise ValueError(f"cores must be a positive number, got {cores!r}")
    return f"{max(1, round(cores * 1000))}m"


@dataclass(frozen=True)
class PodResize:
    """What became of one pod's resize."""

    pod: str
    asked: str  # the CPU quantity sent
    applied: str | None  # what the kubelet reports running with (None: not reported)
    pending: str = ""  # PodResizePending's reason (Deferred, Infeasible), or ""
    message: str = ""

    @property
    def done(self) -> bool:
        return not self.pending and self.applied == self.asked


def _raw(method: Any, *args: Any, **kw: Any) -> Obj:
    """Call the official client and read the JSON it answered, untyped: a pod's typed model
    refuses what Knative's defaulting leaves implicit (a probe without a port)."""
    response = method(*args, _preload_content=False, **kw)
    try:
        body = json.loads(response.data or b"{}")
    finally:
        response.release_conn()
    if not isinstance(body, dict):
        raise KnativeError(f"unexpected answer from the API: {body!r}")
    return body


class PodCores:
    """Sets the CPU of a Knative Service's pods in ``namespace``."""

    def __init__(
        self, api_client: k8s.ApiClient, namespace: str = "default", *, container: str = CONTAINER
    ) -> None:
        self.namespace = namespace
        self.container = container
        self._core = k8s.CoreV1Api(api_client)
        self._version = k8s.VersionApi(api_client)
        self._checked = False

    def check(self) -> None:
        """Raise :class:`ResizeUnavailableError` on a cluster older than 1.33 (once)."""
        if self._checked:
            return
        try:
            info = _raw(self._version.get_code)
        except ApiException as exc:
            raise api_error(exc, "version") from None
        raw = f"{info.get('major', '0')}.{info.get('minor', '0')}"
        digits = [int("".join(ch for ch in part if ch.isdigit()) or 0) for part in raw.split(".")]
        if tuple(digits[:2]) < RESIZE_SINCE:
            raise ResizeUnavailableError(str(info.get("gitVersion") or raw))
        self._checked = True

    def pods(self, function: str) -> list[Obj]:
        """The function's running pods that are not being deleted."""
        try:
            listed = _raw(
                self._core.list_namespaced_pod,
                self.namespace,
                label_selector=f"{SERVICE_LABEL}={function}",
            )
        except ApiException as exc:
            raise api_error(exc, f"pods of {function} in namespace {self.namespace}") from None
        return [
            pod
            for pod in listed.get("items", []) or []
            if (pod.get("status") or {}).get("phase") == "Running"
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        ]

    def _patch(self, pod: Obj, quantity: str) -> Obj:
        resources = next(
            (
                c.get("resources") or {}
                for c in pod["spec"]["containers"]
                if c.get("name") == self.container
            ),
            None,
        )
        name = pod["metadata"]["name"]
        if resources is None:
            raise KnativeError(f"pod {name} has no container named {self.container!r}")
        wanted: Obj = {"requests": {"cpu": quantity}}
        if "cpu" in (resources.get("limits") or {}):  # keep the QoS class: limit moves too
            wanted["limits"] = {"cpu": quantity}
        body = {"spec": {"containers": [{"name": self.container, "resources": wanted}]}}
        try:
            return _raw(
                self._core.patch_namespaced_pod_resize,
                name,
                self.namespace,
                body,
                _content_type="application/strategic-merge-patch+json",
            )
        except ApiException as exc:
            raise api_error(exc, f"pods/{name}/resize in namespace {self.namespace}") from None

    def _result(self, pod: Obj, quantity: str) -> PodResize:
        status = pod.get("status") or {}
        applied = next(
            (
                ((s.get("resources") or {}).get("requests") or {}).get("cpu")
                for s in status.get("containerStatuses") or []
                if s.get("name") == self.container
            ),
            None,
        )
        pending: Obj = next(
            (
                c
                for c in status.get("conditions") or []
                if c.get("type") == "PodResizePending" and c.get("status") == "True"
            ),
            {},
        )
        return PodResize(
            pod=pod["metadata"]["name"],
            asked=quantity,
            applied=None if applied is None else str(applied),
            pending=str(pending.get("reason", "")),
            message=str(pending.get("message", "")),
        )

    def set_cores(self, function: str, cores: float) -> list[PodResize]:
        """Give ``function``'s running pods ``cores`` between them, split evenly."""
        millicores(cores)  # validates
        self.check()
        pods = self.pods(function)
        if not pods:
            return []
        quantity = millicores(cores / len(pods))
        return [self._result(self._patch(pod, quantity), quantity) for pod in pods]
