"""Pods in the in-memory API server, with the in-place ``resize`` subresource (Kubernetes 1.33).

A test double's (see :mod:`tests.kube.fake_api`). Each Revision runs
``status.actualReplicas`` pods (``{revision}-deployment-{k}``), made from its containers and
labelled as Knative labels them; they are brought in line with the revisions whenever pods are
read. Served:

- ``/api/v1/namespaces/{ns}/pods`` (list, ``labelSelector``) and ``.../pods/{name}`` (get);
- ``.../pods/{name}/resize``: GET, and PATCH with ``application/strategic-merge-patch+json``
  (containers merged by name) or ``application/merge-patch+json``. As the API server does, only
  the containers' cpu and memory may change, the pod's QoS class may not, and a resize is 404
  before Kubernetes 1.33. The kubelet's half is acted out on a node of ``node_cores`` cores: the
  new allocation is applied at once (``status.containerStatuses[].resources``) when it fits, and
  otherwise left pending with a ``PodResizePending`` condition (``Infeasible`` beyond the node,
  ``Deferred`` beyond what the other pods leave).
- ``/version``: the server's version (``kubernetes_version``).
"""

from __future__ import annotations

import copy
import itertools
import threading
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.kube.fake_controller import SERVING, matches, merge_patch, parse_selector
from tests.kube.fake_faults import _status
from tests.kube.rbac import allows, verb_for

__all__ = ["PodStore", "cpu_cores", "qos_class"]

Obj = dict[str, Any]
#: what a resize may change in a container's resources
_RESIZABLE = frozenset({"cpu", "memory"})


def cpu_cores(quantity: object) -> float:
    """A CPU quantity (``"1"``, ``"1.5"``, ``"750m"``, 2) in cores."""
    text = str(quantity).strip()
    if text.endswith("m"):
        return float(text[:-1]) / 1000.0
    return float(text)


def qos_class(containers: list[Obj]) -> str:
    """Kubernetes' QoS class of a pod from its containers' resources."""
    guaranteed, empty = True, True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        if requests or limits:
            empty = False
        for kind in ("cpu", "memory"):
            limit = limits.get(kind)
            if limit is None or str(requests.get(kind, limit)) != str(limit):
                guaranteed = False
    if empty:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _merge_containers(current: list[Obj], patch: list[Any]) -> list[Obj]:
    """A strategic merge of ``containers``: entries merged by ``name``."""
    merged = [copy.deepcopy(c) for c in current]
    by_name = {c.get("name"): c for c in merged}
    for entry in patch:
        if not isinstance(entry, dict):
            raise ValueError("containers entries must be objects")
        target = by_name.get(entry.get("name"))
        if target is None:
            raise ValueError(f"spec.containers: Not found: container {entry.get('name')!r}")
        target.update(merge_patch(target, entry))
    return merged


class PodStore:
    """The pods half of the in-memory API server (mixed into it)."""

    _objects: dict[tuple[str, str, str], Obj]
    _lock: threading.Lock
    _versions: itertools.count[int]
    rules: list[Obj] | None
    denied: list[tuple[str, str]]
    requests: list[tuple[str, str]]
    #: the version /version reports; the resize subresource exists from 1.33 on
    kubernetes_version: str = "1.33.0"
    #: the cores of the one node every pod runs on
    node_cores: float = 4.0

    if TYPE_CHECKING:  # the controller half's

        def _bump(self, obj: Obj) -> None: ...

        def _settle(self) -> None: ...

    def pod_routes(self) -> list[Route]:
        base = "/api/v1/namespaces/{namespace}/pods"
        return [
            Route(base, self._pods, methods=["GET"]),
            Route(base + "/{name}", self._pod, methods=["GET"]),
            Route(base + "/{name}/resize", self._pod, methods=["GET", "PATCH"]),
            Route("/version", self._version, methods=["GET"]),
        ]

    def _sync_pods(self) -> None:
        """Every revision runs ``status.actualReplicas`` pods; the rest go."""
        wanted: set[tuple[str, str]] = set()
        for (plural, namespace, name), revision in list(self._objects.items()):
            if plural != "revisions":
                continue
            count = int(revision.get("status", {}).get("actualReplicas", 0) or 0)
            for k in range(count):
                pod_name = f"{name}-deployment-{k}"
                wanted.add((namespace, pod_name))
                if ("pods", namespace, pod_name) not in self._objects:
                    self._objects[("pods", namespace, pod_name)] = self._new_pod(
                        namespace, pod_name, revision
                    )
        for key in [k for k in self._objects if k[0] == "pods" and (k[1], k[2]) not in wanted]:
            del self._objects[key]

    def _new_pod(self, namespace: str, name: str, revision: Obj) -> Obj:
        meta = revision["metadata"]
        labels = dict(meta.get("labels", {}))
        labels[f"{SERVING}/revision"] = meta["name"]
        containers = copy.deepcopy(revision.get("spec", {}).get("containers", []))
        for container in containers:
            container.setdefault("name", "user-container")
        statuses = [
            {"name": c["name"], "ready": True, "resources": copy.deepcopy(c.get("resources", {}))}
            for c in containers
        ]
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels,
                "uid": f"uid-{next(self._versions)}",
            },
            "spec": {"nodeName": "node-1", "containers": containers},
            "status": {
                "phase": "Running",
                "qosClass": qos_class(containers),
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": statuses,
            },
        }
        self._bump(pod)
        return pod

    def _pod_forbidden(self, request: Request, resource: str) -> JSONResponse | None:
        if self.rules is None:
            return None
        name = request.path_params.get("name")
        verb = verb_for(request.method, named=name is not None)
        if allows(self.rules, group="", resource=resource, verb=verb, name=name):
            return None
        self.denied.append((verb, request.url.path))
        message = (
            f'{resource} "{name or ""}" is forbidden: User '
            f'"system:serviceaccount:slackwise-adapter" cannot {verb} resource "{resource}" in '
            'API group "" in the namespace'
        )
        return _status(403, "Forbidden", message, name or "", resource)

    async def _version(self, request: Request) -> JSONResponse:
        major, minor, *_ = self.kubernetes_version.split(".")
        return JSONResponse({"major": major, "minor": minor,
                             "gitVersion": f"v{self.kubernetes_version}"})  # fmt: skip

    async def _pods(self, request: Request) -> JSONResponse:
        namespace = request.path_params["namespace"]
        self.requests.append((request.method, request.url.path))
        forbidden = self._pod_forbidden(request, "pods")
        if forbidden is not None:
            return forbidden
        selector = parse_selector(request.query_params.get("labelSelector", ""))
        with self._lock:
            self._settle()
            self._sync_pods()
            items = [
                copy.deepcopy(obj)
                for (plural, ns, _), obj in sorted(self._objects.items())
                if plural == "pods" and ns == namespace and matches(obj, selector)
            ]
        return JSONResponse({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                             "items": items})  # fmt: skip

    def _resize_supported(self) -> bool:
        major, minor, *_ = (int(x) for x in self.kubernetes_version.split("."))
        return (major, minor) >= (1, 33)

    async def _pod(self, request: Request) -> JSONResponse:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        self.requests.append((request.method, request.url.path))
        resize = request.url.path.endswith("/resize")
        if resize and not self._resize_supported():
            return _status(404, "NotFound", "the server could not find the requested resource")
        forbidden = self._pod_forbidden(request, "pods/resize" if resize else "pods")
        if forbidden is not None:
            return forbidden
        body = await request.json() if request.method == "PATCH" else None
        content_type = request.headers.get("content-type", "")
        with self._lock:
            self._settle()
            self._sync_pods()
            pod = self._objects.get(("pods", namespace, name))
            if pod is None:
                return _status(404, "NotFound", f'pods "{name}" not found', name, "pods")
            if request.method == "GET":
                return JSONResponse(copy.deepcopy(pod))
            return self._resize(pod, body, content_type)

    def _resize(self, pod: Obj, body: Any, content_type: str) -> JSONResponse:
        name = pod["metadata"]["name"]

        def invalid(detail: str) -> JSONResponse:
            return _status(422, "Invalid", f'Pod "{name}" is invalid: {detail}', name, "pods")

        if not isinstance(body, dict):
            return invalid("the patch must be an object")
        spec_patch = body.get("spec", {})
        if (
            set(body) - {"spec"}
            or not isinstance(spec_patch, dict)
            or set(spec_patch) - {"containers"}
        ):
            return invalid("spec: Forbidden: only cpu and memory resources are mutable")
        current = pod["spec"]["containers"]
        try:
            if content_type.startswith("application/strategic-merge-patch+json"):
                containers = _merge_containers(current, spec_patch.get("containers", []))
            elif content_type.startswith("application/merge-patch+json"):
                containers = merge_patch(current, spec_patch.get("containers", current))
            else:
                return _status(415, "UnsupportedMediaType", f"unsupported: {content_type}")
        except ValueError as exc:
            return invalid(str(exc))
        if not isinstance(containers, list) or len(containers) != len(current):
            return invalid("spec.containers: Forbidden: containers may not be added or removed")
        for before, after in zip(current, containers, strict=True):
            rest = {k: v for k, v in after.items() if k != "resources"}
            if rest != {k: v for k, v in before.items() if k != "resources"}:
                return invalid("spec: Forbidden: only cpu and memory resources are mutable")
            for part in ("requests", "limits"):
                kinds = set((after.get("resources") or {}).get(part) or {})
                kinds |= set((before.get("resources") or {}).get(part) or {})
                if kinds - _RESIZABLE:
                    return invalid(f"spec.containers[*].resources.{part}: Forbidden: only cpu "
                                   "and memory resources are mutable")  # fmt: skip
        if qos_class(containers) != pod["status"]["qosClass"]:
            return invalid("spec: Forbidden: Pod QoS is immutable")
        pod["spec"]["containers"] = containers
        self._kubelet_resize(pod)
        self._bump(pod)
        return JSONResponse(copy.deepcopy(pod))

    @staticmethod
    def _cpu(containers: list[Obj]) -> float:
        return sum(
            cpu_cores(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
            for c in containers
        )

    def _kubelet_resize(self, pod: Obj) -> None:
        """Apply the pod's new resources if its node has room; otherwise mark it pending."""
        status = pod["status"]
        conditions = [c for c in status["conditions"] if c["type"] != "PodResizePending"]
        asked = self._cpu(pod["spec"]["containers"])
        others = sum(  # what the node has given the other pods (not what they ask for)
            self._cpu(other["status"]["containerStatuses"])
            for (plural, _, _), other in self._objects.items()
            if plural == "pods" and other is not pod
        )
        reason = ""
        if asked > self.node_cores:
            reason = "Infeasible"
        elif asked + others > self.node_cores:
            reason = "Deferred"
        if reason:
            message = f"Node didn't have enough capacity: cpu, requested: {asked:g}, " + (
                f"capacity: {self.node_cores:g}" if reason == "Infeasible"
                else f"allocatable left: {max(0.0, self.node_cores - others):g}"
            )  # fmt: skip
            conditions.append({"type": "PodResizePending", "status": "True", "reason": reason,
                               "message": message})  # fmt: skip
        else:
            status["containerStatuses"] = [
                {**s, "resources": copy.deepcopy(c.get("resources", {}))}
                for s, c in zip(status["containerStatuses"], pod["spec"]["containers"], strict=True)
            ]
        status["conditions"] = conditions
