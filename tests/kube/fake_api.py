"""A small in-memory Kubernetes API server: a test double for :mod:`knative.cluster.client`.

It is not Kubernetes and not Knative. It serves, over real HTTP on 127.0.0.1 (Starlette under
uvicorn, in a thread), just the REST paths that :class:`knative.cluster.client.KnativeClient` calls:

- ``/apis/serving.knative.dev/v1/namespaces/{ns}/services[/{name}]``: GET, POST, PUT, PATCH
  (``application/merge-patch+json``, and server-side apply: ``application/apply-patch+yaml``
  with a ``fieldManager``, :mod:`tests.kube.apply_patch`), DELETE; ``dryRun=All`` judges a
  write without storing it;
- ``.../revisions[/{name}]``: list (``labelSelector`` with ``k=v`` terms), GET, PATCH;
- ``/apis/autoscaling.internal.knative.dev/v1alpha1/namespaces/{ns}/podautoscalers[/{name}]``;
- every collection: ``watch=true`` (:mod:`tests.kube.fake_watch`);
- ``/api/v1/namespaces/{name}``: GET, so the client can read Knative Serving's version label;
- pods, their ``resize`` subresource and ``/version`` (:mod:`tests.kube.fake_pods`).

Errors are ``Status`` objects with Kubernetes' codes and reasons (404, 409, 422 Invalid, 403
Forbidden). Every write bumps ``metadata.resourceVersion``. As on a cluster, a Service written is
judged by the Serving CRD's schema (when found) and Knative's webhook rules; with
:meth:`FakeKubernetes.enforce` only what a Role grants is allowed (never a cluster-scoped read);
a new revision is Ready ``ready_after_s`` after it was made (``Ready=Unknown`` until then). A toy
controller (:mod:`tests.kube.fake_controller`) stands in for Knative's.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
import yaml
from kubernetes import client as k8s
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from knative.cluster.crd_schema import ManifestError, validate_service
from tests.kube.apply_patch import apply_configuration
from tests.kube.fake_controller import (
    SERVING,
    ToyController,
    matches,
    merge_patch,
    parse_selector,
)
from tests.kube.fake_faults import Faults, _Failure, _status
from tests.kube.fake_pods import PodStore
from tests.kube.fake_watch import WatchLog
from tests.kube.rbac import allows, verb_for

AUTOSCALING = "autoscaling.internal.knative.dev"
#: metadata the API server sets, not the client (left out when judging what was written)
_SERVER_SET = frozenset({"generation", "uid", "resourceVersion", "creationTimestamp",
                         "managedFields", "selfLink"})  # fmt: skip
_KINDS = {
    (SERVING, "v1", "services"): "Service",
    (SERVING, "v1", "revisions"): "Revision",
    (AUTOSCALING, "v1alpha1", "podautoscalers"): "PodAutoscaler",
}
OUTCOMES = ("ready", "pending", "failed")

Obj = dict[str, Any]


class FakeKubernetes(Faults, WatchLog, ToyController, PodStore):
    """The store, the toy controller and the HTTP server; use as a context manager."""

    def __init__(
        self,
        *,
        serving_version: str | None = "1.23.0",
        domain: str = "example.com",
        ready_after_s: float = 0.0,
        validate: bool = True,
    ) -> None:
        self.serving_version = serving_version
        self.domain = domain
        self.ready_after_s = ready_after_s
        self.validate = validate
        #: the rules of the Role in force (None: everything is allowed, as for an admin)
        self.rules: list[Obj] | None = None
        self.denied: list[tuple[str, str]] = []
        self._applied: dict[tuple[str, str, str, str], Obj] = {}
        self._becoming_ready: dict[tuple[str, str], tuple[float, str]] = {}
        self.requests: list[tuple[str, str]] = []
        self._objects: dict[tuple[str, str, str], Obj] = {}
        self._outcomes: dict[str, tuple[str, str, str]] = {}
        self._failures: dict[tuple[str, str | None, str | None], _Failure] = {}
        self._versions = itertools.count(1)
        self._lock = threading.Lock()
        self._init_watches()
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

    def enforce(self, role: Obj | None) -> None:
        """Allow only what ``role`` (a Role object, or None for everything) grants."""
        self.rules = None if role is None else list(role.get("rules", []))

    def _forbidden(self, request: Request, *, cluster_scoped: bool = False) -> JSONResponse | None:
        if self.rules is None:
            return None
        p = request.path_params
        group, plural, name = p.get("group", ""), p.get("plural", "namespaces"), p.get("name")
        watch = request.query_params.get("watch") in ("true", "1")
        verb = verb_for(request.method, named=name is not None, watch=watch)
        if allows(self.rules, group=group, resource=plural, verb=verb, name=name,
                  cluster_scoped=cluster_scoped):  # fmt: skip
            return None
        self.denied.append((verb, request.url.path))
        where = "at the cluster scope" if cluster_scoped else "in the namespace"
        message = (
            f'{plural} "{name or ""}" is forbidden: User "system:serviceaccount:slackwise-adapter" '
            f'cannot {verb} resource "{plural}" in API group "{group}" {where}'
        )
        return _status(403, "Forbidden", message, name or "", plural)

    def _invalid(self, plural: str, obj: Obj) -> JSONResponse | None:
        if plural != "services" or not self.validate:
            return None
        name = str(obj.get("metadata", {}).get("name", ""))
        authored = {k: v for k, v in obj.items() if k != "status"}  # what a client wrote
        authored["metadata"] = {k: v for k, v in obj.get("metadata", {}).items()
                                if k not in _SERVER_SET}  # fmt: skip
        try:
            validate_service(authored, function=name, schema_required=False)
        except ManifestError as exc:
            message = f'Service.serving.knative.dev "{name}" is invalid: {exc}'
            return _status(422, "Invalid", message, name, plural)
        return None

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
        self._stopping.set()  # open watches end
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10.0)

    def reset(self) -> None:
        with self._lock:
            self._objects.clear()
            self._events.clear()
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
                *self.pod_routes(),
            ]
        )

    # -- handlers ------------------------------------------------------------------------------

    def _kind(self, request: Request) -> str | None:
        p = request.path_params
        return _KINDS.get((p["group"], p["version"], p["plural"]))

    async def _collection(self, request: Request) -> Response:
        plural, namespace = request.path_params["plural"], request.path_params["namespace"]
        self.requests.append((request.method, request.url.path))
        kind = self._kind(request)
        if kind is None:
            return _status(404, "NotFound", "the server could not find the requested resource")
        forbidden = self._forbidden(request)
        if forbidden is not None:
            return forbidden
        injected = self._injected(plural, None, request.method)
        if injected is not None:
            return injected
        if request.method == "GET":
            selector = parse_selector(request.query_params.get("labelSelector", ""))
            if request.query_params.get("watch") in ("true", "1"):
                return self._watch(request, plural, namespace, lambda o: matches(o, selector))
            with self._lock:
                self._settle()
                items = [
                    copy.deepcopy(obj)
                    for (p, ns, _), obj in sorted(self._objects.items())
                    if p == plural and ns == namespace and matches(obj, selector)
                ]
                listed = {"resourceVersion": self._list_version()}
            return JSONResponse(
                {"kind": f"{kind}List", "apiVersion": "v1", "metadata": listed, "items": items}
            )
        body = await request.json()
        name = body.get("metadata", {}).get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return _status(422, "Invalid", f"{kind} is invalid: metadata.name: Required value")
        injected = self._injected(plural, name, request.method)
        if injected is not None:
            return injected
        invalid = self._invalid(plural, body)
        if invalid is not None:
            return invalid
        if request.query_params.get("dryRun") == "All":
            return JSONResponse(copy.deepcopy(body), status_code=201)
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
        forbidden = self._forbidden(request)
        if forbidden is not None:
            return forbidden
        injected = self._injected(plural, name, request.method)
        if injected is not None:
            return injected
        key = (plural, namespace, name)
        content_type = request.headers.get("content-type", "")
        applying = request.method == "PATCH" and content_type.startswith("application/apply-patch")
        body = None
        if request.method not in ("GET", "DELETE"):
            raw = await request.body()
            body = yaml.safe_load(raw) if applying else await request.json()
        if applying:
            return self._apply(request, key, body)
        with self._lock:
            self._settle()
            current = self._objects.get(key)
            if current is None:
                message = f'{plural}.{p["group"]} "{name}" not found'
                return _status(404, "NotFound", message, name, plural)
            if request.method == "GET":
                return JSONResponse(copy.deepcopy(current))
            if request.method == "DELETE":
                if request.query_params.get("dryRun") != "All":
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
            return self._store(key, current, updated, dry_run=False)

    def _apply(self, request: Request, key: tuple[str, str, str], body: Any) -> JSONResponse:
        """Server-side apply: create, or update the fields this manager owns."""
        plural, namespace, name = key
        manager = request.query_params.get("fieldManager", "")
        if not manager:
            return _status(400, "BadRequest", "PATCH with application/apply-patch requires a "
                           "fieldManager")  # fmt: skip
        if not isinstance(body, dict):
            return _status(400, "BadRequest", "an apply configuration must be an object")
        dry_run = request.query_params.get("dryRun") == "All"
        with self._lock:
            self._settle()
            current = self._objects.get(key)
            previous = self._applied.get((*key, manager))
            base = current if current is not None else {}
            updated = apply_configuration(base, previous, body)
            updated.setdefault("metadata", {})["name"] = name
            invalid = self._invalid(plural, updated)
            if invalid is not None:
                return invalid
            if current is None:
                if dry_run:
                    return JSONResponse(copy.deepcopy(updated), status_code=201)
                updated["metadata"].update(
                    namespace=namespace, generation=1, uid=f"uid-{next(self._versions)}"
                )
                updated.pop("status", None)
                self._objects[key] = updated
                self._applied[(*key, manager)] = copy.deepcopy(body)
                self._bump(updated)
                if plural == "services":
                    self._reconcile(namespace, updated)
                return JSONResponse(copy.deepcopy(updated), status_code=201)
            updated["status"] = current.get("status", {})
            if not dry_run:
                self._applied[(*key, manager)] = copy.deepcopy(body)
            if updated == current:
                return JSONResponse(copy.deepcopy(current))  # a no-op: nothing bumped
            return self._store(key, current, updated, dry_run=dry_run)

    def _store(self, key: tuple[str, str, str], current: Obj, updated: Obj, *,
               dry_run: bool) -> JSONResponse:  # fmt: skip
        """Keep ``updated`` in place of ``current`` (the lock is held)."""
        plural, namespace, _ = key
        for field in ("name", "namespace", "uid", "generation"):
            updated["metadata"][field] = current["metadata"][field]
        if plural == "services" and updated.get("spec") != current.get("spec"):
            invalid = self._invalid(plural, updated)
            if invalid is not None:
                return invalid
        if dry_run:
            return JSONResponse(copy.deepcopy(updated))
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
        forbidden = self._forbidden(request, cluster_scoped=True)
        if forbidden is not None:
            return forbidden
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


@contextmanager
def running(**options: Any) -> Iterator[FakeKubernetes]:
    """A started :class:`FakeKubernetes`, stopped on exit."""
    fake = FakeKubernetes(**options)
    with fake:
        yield fake
