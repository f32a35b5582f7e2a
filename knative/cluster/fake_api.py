"""A small in-memory Kubernetes API server: a test double for :mod:`knative.cluster.client`.

It is not Kubernetes and not Knative. It serves, over real HTTP on 127.0.0.1 (Starlette under
uvicorn, in a thread), just the REST paths that :class:`knative.cluster.client.KnativeClient` calls:

- ``/apis/serving.knative.dev/v1/namespaces/{ns}/services[/{name}]``: GET, POST, PUT, PATCH
  (``application/merge-patch+json`` only), DELETE;
- ``.../revisions[/{name}]``: list (``labelSelector`` with ``k=v`` terms), GET, PATCH;
- ``/apis/autoscaling.internal.knative.dev/v1alpha1/namespaces/{ns}/podautoscalers/{name}``;
- ``/api/v1/namespaces/{name}``: GET, so the client can read Knative Serving's version label.

Errors are ``Status`` objects with Kubernetes' codes and reasons (404 NotFound, 409 AlreadyExists
and Conflict, 422 Invalid, 403 Forbidden when injected with :meth:`FakeKubernetes.forbid`).
Every write bumps ``metadata.resourceVersion``.

A toy controller stands in for Knative's: when a Service is created or its spec changes it bumps
``metadata.generation`` and makes Revision ``NAME-0000N`` plus a PodAutoscaler of the same name,
then sets the Service's status (conditions, ``url``, ``address.url``, latest revision names). What
happens to a new revision is set per service with :meth:`FakeKubernetes.set_outcome`: ``ready``
(default), ``pending`` (Ready=Unknown forever) or ``failed`` (Ready=False).
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from kubernetes import client as k8s
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from core.scaling_values import MIN_SCALE

SERVING = "serving.knative.dev"
AUTOSCALING = "autoscaling.internal.knative.dev"
_KINDS = {
    (SERVING, "v1", "services"): "Service",
    (SERVING, "v1", "revisions"): "Revision",
    (AUTOSCALING, "v1alpha1", "podautoscalers"): "PodAutoscaler",
}
OUTCOMES = ("ready", "pending", "failed")

Obj = dict[str, Any]


@dataclass(frozen=True)
class _Failure:
    status: int
    reason: str
    message: str


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _status(code: int, reason: str, message: str, name: str = "", kind: str = "") -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"name": name, "kind": kind},
        "code": code,
    }
    return JSONResponse(body, status_code=code)


class FakeKubernetes:
    """The store, the toy controller and the HTTP server; use as a context manager."""

    def __init__(
        self, *, serving_version: str | None = "1.23.0", domain: str = "example.com"
    ) -> None:
        self.serving_version = serving_version
        self.domain = domain
        self.requests: list[tuple[str, str]] = []
        self._objects: dict[tuple[str, str, str], Obj] = {}
        self._outcomes: dict[str, tuple[str, str, str]] = {}
        self._failures: dict[tuple[str, str | None, str | None], _Failure] = {}
        self._versions = itertools.count(1)
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- test controls -------------------------------------------------------------------------

    def set_outcome(
        self, service: str, outcome: str, *, reason: str = "", message: str = ""
    ) -> None:
        """What happens to ``service``'s next revisions: ``ready``, ``pending`` or ``failed``."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        self._outcomes[service] = (outcome, reason, message)

    def forbid(self, plural: str, *, name: str | None = None, method: str | None = None) -> None:
        """Answer 403 Forbidden to ``method`` (all when None) on ``plural`` (``name`` or all)."""
        verb = (method or "*").lower()
        message = (
            f'{plural} "{name or "*"}" is forbidden: User "system:serviceaccount:test:slackwise"'
            f' cannot {verb} resource "{plural}" in the namespace'
        )
        self._failures[(plural, name, method)] = _Failure(403, "Forbidden", message)

    def fail(self, plural: str, status: int, reason: str, message: str, **where: str) -> None:
        """Answer ``status`` to requests on ``plural`` (``name=`` and ``method=`` narrow it)."""
        key = (plural, where.get("name"), where.get("method"))
        self._failures[key] = _Failure(status, reason, message)

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        with self._lock:
            obj = self._objects.get((plural, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def names(self, plural: str, namespace: str) -> list[str]:
        with self._lock:
            return sorted(n for p, ns, n in self._objects if p == plural and ns == namespace)

    def merge(self, plural: str, namespace: str, name: str, patch: Obj) -> None:
        """Merge ``patch`` into a stored object, as defaulting webhooks or controllers would."""
        with self._lock:
            key = (plural, namespace, name)
            self._objects[key] = merge_patch(self._objects[key], patch)
            self._bump(self._objects[key])

    # -- server --------------------------------------------------------------------------------

    def api_client(self) -> k8s.ApiClient:
        """A ``kubernetes`` client pointed at this server."""
        configuration = k8s.Configuration(host=self.url)
        return k8s.ApiClient(configuration)

    def start(self) -> None:
        config = uvicorn.Config(
            self.app(), host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-kube", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake Kubernetes API server did not start")
            time.sleep(0.005)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10.0)

    def reset(self) -> None:
        with self._lock:
            self._objects.clear()
            self._outcomes.clear()
            self._failures.clear()
            self.requests.clear()

    def __enter__(self) -> FakeKubernetes:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def app(self) -> Starlette:
        base = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
        methods = ["GET", "PUT", "PATCH", "DELETE"]
        return Starlette(
            routes=[
                Route(base, self._collection, methods=["GET", "POST"]),
                Route(base + "/{name}", self._item, methods=methods),
                Route("/api/v1/namespaces/{name}", self._namespace, methods=["GET"]),
            ]
        )

    # -- handlers ------------------------------------------------------------------------------

    def _injected(self, plural: str, name: str | None, method: str) -> JSONResponse | None:
        for key in ((plural, name, method), (plural, name, None), (plural, None, method)):
            failure = self._failures.get(key)
            if failure is not None:
                return _status(failure.status, failure.reason, failure.message, name or "", plural)
        failure = self._failures.get((plural, None, None))
        if failure is not None:
            return _status(failure.status, failure.reason, failure.message, name or "", plural)
        return None

    def _kind(self, request: Request) -> str | None:
        p = request.path_params
        return _KINDS.get((p["group"], p["version"], p["plural"]))

    async def _collection(self, request: Request) -> JSONResponse:
        plural, namespace = request.path_params["plural"], request.path_params["namespace"]
        self.requests.append((request.method, request.url.path))
        kind = self._kind(request)
        if kind is None:
            return _status(404, "NotFound", "the server could not find the requested resource")
        injected = self._injected(plural, None, request.method)
        if injected is not None:
            return injected
        if request.method == "GET":
            selector = _parse_selector(request.query_params.get("labelSelector", ""))
            with self._lock:
                items = [
                    copy.deepcopy(obj)
                    for (p, ns, _), obj in sorted(self._objects.items())
                    if p == plural and ns == namespace and _matches(obj, selector)
                ]
            return JSONResponse({"kind": f"{kind}List", "apiVersion": "v1", "items": items})
        body = await request.json()
        name = body.get("metadata", {}).get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return _status(422, "Invalid", f"{kind} is invalid: metadata.name: Required value")
        injected = self._injected(plural, name, request.method)
        if injected is not None:
            return injected
        with self._lock:
            if (plural, namespace, name) in self._objects:
                message = f'{plural}.{request.path_params["group"]} "{name}" already exists'
                return _status(409, "AlreadyExists", message, name, plural)
            obj = copy.deepcopy(body)
            obj["metadata"]["namespace"] = namespace
            obj["metadata"]["generation"] = 1
            obj["metadata"]["uid"] = f"uid-{next(self._versions)}"
            obj.pop("status", None)
            self._objects[(plural, namespace, name)] = obj
            self._bump(obj)
            if plural == "services":
                self._reconcile(namespace, obj)
            return JSONResponse(copy.deepcopy(obj), status_code=201)

    async def _item(self, request: Request) -> JSONResponse:
        p = request.path_params
        plural, namespace, name = p["plural"], p["namespace"], p["name"]
        self.requests.append((request.method, request.url.path))
        kind = self._kind(request)
        if kind is None:
            return _status(404, "NotFound", "the server could not find the requested resource")
        injected = self._injected(plural, name, request.method)
        if injected is not None:
            return injected
        key = (plural, namespace, name)
        body = None if request.method in ("GET", "DELETE") else await request.json()
        content_type = request.headers.get("content-type", "")
        with self._lock:
            current = self._objects.get(key)
            if current is None:
                message = f'{plural}.{p["group"]} "{name}" not found'
                return _status(404, "NotFound", message, name, plural)
            if request.method == "GET":
                return JSONResponse(copy.deepcopy(current))
            if request.method == "DELETE":
                self._delete(namespace, plural, name)
                return JSONResponse({"kind": "Status", "apiVersion": "v1", "status": "Success"})
            if request.method == "PATCH":
                if not content_type.startswith("application/merge-patch+json"):
                    return _status(415, "UnsupportedMediaType", f"unsupported: {content_type}")
                updated = merge_patch(current, body)
            else:
                if not isinstance(body, dict):
                    return _status(422, "Invalid", f"{kind} is invalid: body must be an object")
                sent = body.get("metadata", {}).get("resourceVersion")
                if sent and sent != current["metadata"]["resourceVersion"]:
                    message = (
                        f'Operation cannot be fulfilled on {plural}.{p["group"]} "{name}": the '
                        "object has been modified; please apply your changes to the latest "
                        "version and try again"
                    )
                    return _status(409, "Conflict", message, name, plural)
                updated = copy.deepcopy(body)
                updated["status"] = current.get("status", {})
            for field in ("name", "namespace", "uid", "generation"):
                updated["metadata"][field] = current["metadata"][field]
            spec_changed = updated.get("spec") != current.get("spec")
            if spec_changed:
                updated["metadata"]["generation"] += 1
            self._objects[key] = updated
            self._bump(updated)
            if plural == "services" and spec_changed:
                self._reconcile(namespace, updated)
            if plural == "revisions":
                self._sync_autoscaler(namespace, updated)
            return JSONResponse(copy.deepcopy(updated))

    async def _namespace(self, request: Request) -> JSONResponse:
        name = request.path_params["name"]
        self.requests.append((request.method, request.url.path))
        injected = self._injected("namespaces", name, "GET")
        if injected is not None:
            return injected
        if name != "knative-serving" or self.serving_version is None:
            return _status(404, "NotFound", f'namespaces "{name}" not found', name, "namespaces")
        labels = {
            "app.kubernetes.io/name": "knative-serving",
            "app.kubernetes.io/version": self.serving_version,
        }
        metadata = {"name": name, "labels": labels}
        return JSONResponse({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})

    # -- toy controller (called with the lock held) ---------------------------------------------

    def _bump(self, obj: Obj) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def _delete(self, namespace: str, plural: str, name: str) -> None:
        del self._objects[(plural, namespace, name)]
        if plural != "services":
            return
        for key, obj in list(self._objects.items()):
            labels = obj["metadata"].get("labels", {})
            if key[1] == namespace and labels.get(f"{SERVING}/service") == name:
                del self._objects[key]
                self._objects.pop(("podautoscalers", namespace, key[2]), None)

    def _reconcile(self, namespace: str, service: Obj) -> None:
        name = service["metadata"]["name"]
        generation = service["metadata"]["generation"]
        template = service.get("spec", {}).get("template", {})
        annotations = dict(template.get("metadata", {}).get("annotations", {}))
        count = sum(
            1
            for (p, ns, _), obj in self._objects.items()
            if p == "revisions"
            and ns == namespace
            and obj["metadata"].get("labels", {}).get(f"{SERVING}/service") == name
        )
        revision_name = f"{name}-{count + 1:05d}"
        outcome, reason, message = self._outcomes.get(name, ("ready", "", ""))
        initial = int(annotations.get(MIN_SCALE, "0") or 0) or 1
        ready_replicas = initial if outcome == "ready" else 0
        revision: Obj = {
            "apiVersion": f"{SERVING}/v1",
            "kind": "Revision",
            "metadata": {
                "name": revision_name,
                "namespace": namespace,
                "generation": 1,
                "uid": f"uid-{next(self._versions)}",
                "labels": {
                    f"{SERVING}/service": name,
                    f"{SERVING}/configuration": name,
                    f"{SERVING}/configurationGeneration": str(generation),
                },
                "annotations": annotations,
            },
            "spec": copy.deepcopy(template.get("spec", {})),
            "status": {
                "observedGeneration": 1,
                "conditions": [_condition(outcome, reason, message)],
                "actualReplicas": ready_replicas,
                "desiredReplicas": initial,
            },
        }
        self._objects[("revisions", namespace, revision_name)] = revision
        self._bump(revision)
        autoscaler: Obj = {
            "apiVersion": f"{AUTOSCALING}/v1alpha1",
            "kind": "PodAutoscaler",
            "metadata": {"name": revision_name, "namespace": namespace, "generation": 1},
            "spec": {"reachability": "Reachable"},
            "status": {"desiredScale": initial, "actualScale": ready_replicas},
        }
        self._objects[("podautoscalers", namespace, revision_name)] = autoscaler
        self._bump(autoscaler)
        status = service.setdefault("status", {})
        status["observedGeneration"] = generation
        status["latestCreatedRevisionName"] = revision_name
        status["address"] = {"url": f"http://{name}.{namespace}.svc.cluster.local"}
        if outcome == "ready":
            status["latestReadyRevisionName"] = revision_name
            status["url"] = f"http://{name}.{namespace}.{self.domain}"
            status["traffic"] = [{"revisionName": revision_name, "percent": 100}]
            status["conditions"] = [_condition("ready", "", "")]
        elif outcome == "pending":
            wait = f'Configuration "{name}" is waiting for a Revision to become ready.'
            status["conditions"] = [_condition("pending", "RevisionMissing", wait)]
        else:
            failed = f'Revision "{revision_name}" failed with message: {message}'
            status["conditions"] = [_condition("failed", "RevisionMissing", failed)]
        self._bump(service)

    def _sync_autoscaler(self, namespace: str, revision: Obj) -> None:
        name = revision["metadata"]["name"]
        autoscaler = self._objects.get(("podautoscalers", namespace, name))
        if autoscaler is None:
            return
        raw = revision["metadata"].get("annotations", {}).get(MIN_SCALE)
        floor = int(raw) if raw else 0
        status = autoscaler.setdefault("status", {})
        status["desiredScale"] = max(floor, int(status.get("actualScale", 0)))
        self._bump(autoscaler)


def _condition(outcome: str, reason: str, message: str) -> Obj:
    status = {"ready": "True", "pending": "Unknown", "failed": "False"}[outcome]
    condition: Obj = {"type": "Ready", "status": status}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def _parse_selector(text: str) -> dict[str, str]:
    terms = [t for t in text.split(",") if t]
    return dict(t.split("=", 1) for t in terms)


def _matches(obj: Obj, selector: dict[str, str]) -> bool:
    labels = obj.get("metadata", {}).get("labels", {})
    return all(labels.get(k) == v for k, v in selector.items())


@contextmanager
def running(**options: Any) -> Iterator[FakeKubernetes]:
    """A started :class:`FakeKubernetes`, stopped on exit."""
    fake = FakeKubernetes(**options)
    with fake:
        yield fake
