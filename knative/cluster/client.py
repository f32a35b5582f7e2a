"""Knative Services on a real cluster, through the official ``kubernetes`` client.

:class:`KnativeClient` applies (server-side), waits for and deletes Knative Services in one
namespace, reads their URLs and replica counts, and sets a function's scale on its serving
Revisions' own annotations (the Revision is its PodAutoscaler's source of truth from Knative
Serving 1.21 on, knative/serving#16186: no new revision is made; older clusters are refused).
Exceptions (all carry the values they name)::

    KnativeError
    ├── KubernetesApiError          the API refused a request: status, resource, the API's message
    │   ├── AccessDeniedError       403 Forbidden
    │   ├── ResourceNotFoundError   404 NotFound
    │   ├── ResourceConflictError   409 AlreadyExists / Conflict
    │   └── InvalidResourceError    422 Invalid
    ├── ServiceNotReadyError        Ready=False, or no ready revision / URL yet: reason, message
    │   └── ReadyTimeoutError       not Ready within the timeout: the last reason and message
    └── HookUnavailableError        min-scale on the Revision needs Knative Serving >= 1.21
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from knative.cluster.errors import (
    HOOK_SINCE,
    AccessDeniedError,
    HookUnavailableError,
    KnativeError,
    ReadyTimeoutError,
    ResourceNotFoundError,
    ServiceNotReadyError,
    api_error,
)
from knative.cluster.shares import scale_annotations
from knative.cluster.watch import replica_counts
from knative.local.events import ReplicaCounts
from slackwise_core.scaling_values import MAX_SCALE, MIN_SCALE

__all__ = [
    "MAX_SCALE",
    "MIN_SCALE",
    "KnativeClient",
    "parse_version",
    "ready_condition",
]

logger = logging.getLogger(__name__)


SERVING_GROUP = "serving.knative.dev"
SERVING_VERSION = "v1"
AUTOSCALING_GROUP = "autoscaling.internal.knative.dev"
AUTOSCALING_VERSION = "v1alpha1"
SERVING_NAMESPACE = "knative-serving"
_VERSION_LABELS = ("app.kubernetes.io/version", "serving.knative.dev/release")

Obj = dict[str, Any]


def parse_version(text: str) -> tuple[int, int] | None:
    """``v1.21.0`` or ``1.21`` → (1, 21); anything else (``devel``) → None."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
    return (int(match[1]), int(match[2])) if match else None


def ready_condition(obj: Obj) -> Obj:
    """The ``Ready`` condition of a Knative object, empty if none."""
    for condition in obj.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


#: the field manager of every server-side apply (Kubernetes records who owns which field)
FIELD_MANAGER = "slackwise"


def _authored(obj: Obj) -> Obj:
    """What a client writes of an object: its spec, labels and annotations."""
    meta = obj.get("metadata", {})
    return {
        "spec": obj.get("spec"),
        "labels": meta.get("labels"),
        "annotations": meta.get("annotations"),
    }


def _as_obj(value: object) -> Obj:
    if not isinstance(value, dict):
        raise KnativeError(f"unexpected API answer: {type(value).__name__}")
    return value


class KnativeClient:
    """Knative Services in ``namespace``; ``serving_version`` states the cluster's version."""

    def __init__(
        self,
        api_client: k8s.ApiClient,
        namespace: str = "default",
        *,
        serving_version: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.api_client = api_client
        self._objects = k8s.CustomObjectsApi(api_client)
        self._serving_version = serving_version

    def _call(self, resource: str, method: Callable[..., object], *args: Any, **kw: Any) -> Obj:
        try:
            return _as_obj(method(*args, **kw))
        except ApiException as exc:
            raise api_error(exc, resource) from None

    def _serving(self, verb: str, plural: str, name: str = "", **kw: Any) -> Obj:
        resource = f"{plural}.{SERVING_GROUP}/{name}" if name else f"{plural}.{SERVING_GROUP}"
        resource += f" in namespace {self.namespace}"
        method = getattr(self._objects, f"{verb}_namespaced_custom_object")
        args: list[Any] = [SERVING_GROUP, SERVING_VERSION, self.namespace, plural]
        if name:
            args.append(name)
        return self._call(resource, method, *args, **kw)

    # -- services ------------------------------------------------------------------------------

    def get(self, name: str) -> Obj:
        return self._serving("get", "services", name)

    def create(self, service: Mapping[str, Any]) -> Obj:
        return self._serving("create", "services", body=self._own(service))

    def apply(self, service: Mapping[str, Any], *, dry_run: bool = False) -> tuple[Obj, bool]:
        """Create or update ``service`` by server-side apply (field manager ``slackwise``);
        returns it and whether anything changed.

        The API server owns the merge: a key removed from ``service`` since the last apply goes
        away on the cluster (a merge patch cannot delete), an unchanged spec is a no-op (no new
        revision), and fields other managers set (Knative's defaults) stay. ``dry_run`` sends
        the same request with ``dryRun=All``: Knative's webhooks judge it, nothing is stored.
        """
        body = self._own(service)
        name = body["metadata"]["name"]
        try:
            before: Obj | None = self.get(name)
        except ResourceNotFoundError:
            before = None
        extra: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
        try:
            answer = self._objects.patch_namespaced_custom_object(
                SERVING_GROUP,
                SERVING_VERSION,
                self.namespace,
                "services",
                name,
                body,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type="application/apply-patch+yaml",
                **extra,
            )
        except ApiException as exc:
            raise api_error(exc, f"services.{SERVING_GROUP}/{name} in {self.namespace}") from None
        # the client reads a 201 (created by the apply) as no body: ask for what was made
        result = _as_obj(answer) if answer is not None else body if dry_run else self.get(name)
        if before is None:
            return result, True
        changed = _authored(result) != _authored(before)
        if changed and not dry_run:
            logger.info("updated service %s in %s", name, self.namespace)
        return result, changed

    def delete(self, name: str, *, dry_run: bool = False) -> None:
        """Delete the Service; ``dry_run`` asks the API server to judge it and keep everything."""
        extra: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
        self._serving("delete", "services", name, **extra)

    def wait_ready(
        self,
        name: str,
        timeout_s: float = 300.0,
        progress: Callable[[str], None] | None = None,
        *,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Obj:
        """Poll until the Service's current generation is Ready=True; returns the Service.

        Ready=False is not final (a revision that failed to pull can recover, and kn waits for
        it too): it is reported and the wait goes on. After ``timeout_s`` the error is
        :class:`ServiceNotReadyError` when the last state was Ready=False, else
        :class:`ReadyTimeoutError`, each with the Ready condition's reason and message.
        """
        deadline = clock() + timeout_s
        last = ""
        reason = message = ""
        while True:
            service = self.get(name)
            status = service.get("status", {})
            current = status.get("observedGeneration") == service["metadata"].get("generation")
            condition = ready_condition(service) if current else {}
            state = condition.get("status", "Unknown")
            reason = condition.get("reason", "" if current else "NotObserved")
            message = condition.get("message", "")
            line = f"{name}: Ready={state}" + (f" ({reason}: {message})" if reason else "")
            if progress is not None and line != last:
                progress(line)
            last = line
            if state == "True":
                return service
            if clock() >= deadline:
                if state == "False":
                    raise ServiceNotReadyError(name, reason, message)
                raise ReadyTimeoutError(name, timeout_s, reason, message)
            sleep(min(poll_s, max(0.0, deadline - clock())))

    def url(self, name: str, *, cluster_local: bool = False) -> str:
        """``status.url``; ``status.address.url`` when ``cluster_local`` or no public URL."""
        status = self.get(name).get("status", {})
        public = status.get("url", "")
        local = status.get("address", {}).get("url", "")
        found = (local or public) if cluster_local else (public or local)
        if not found:
            raise ServiceNotReadyError(name, "NoURL", "the service has no URL yet")
        return str(found)

    # -- revisions and replicas ----------------------------------------------------------------

    def revisions(self, name: str) -> list[Obj]:
        selector = f"{SERVING_GROUP}/service={name}"
        answer = self._serving("list", "revisions", label_selector=selector)
        return [_as_obj(item) for item in answer.get("items", [])]

    def latest_ready_revision(self, name: str) -> Obj:
        service = self.get(name)
        revision = service.get("status", {}).get("latestReadyRevisionName")
        if not revision:
            condition = ready_condition(service)
            reason = condition.get("reason", "NoReadyRevision")
            raise ServiceNotReadyError(name, reason, condition.get("message", "no ready revision"))
        return self._serving("get", "revisions", revision)

    def ready_replicas(self, name: str) -> ReplicaCounts:
        """Counts from the latest ready revision's PodAutoscaler, else the revision's status."""
        revision = self.latest_ready_revision(name)
        autoscaler = None
        with contextlib.suppress(AccessDeniedError, ResourceNotFoundError):
            autoscaler = self._autoscaler(revision["metadata"]["name"])
        return replica_counts(revision, autoscaler)

    def _autoscaler(self, revision: str) -> Obj:
        resource = f"podautoscalers.{AUTOSCALING_GROUP}/{revision} in namespace {self.namespace}"
        return self._call(
            resource,
            self._objects.get_namespaced_custom_object,
            AUTOSCALING_GROUP,
            AUTOSCALING_VERSION,
            self.namespace,
            "podautoscalers",
            revision,
        )

    # -- proactive scaling ---------------------------------------------------------------------

    def serving_version(self) -> str:
        """Knative Serving's version: as stated, else the knative-serving namespace's label."""
        if self._serving_version is None:
            self._serving_version = self._detect_version()
        return self._serving_version

    def _detect_version(self) -> str:
        core = k8s.CoreV1Api(self.api_client)
        try:
            namespace = core.read_namespace(SERVING_NAMESPACE)
        except ApiException as exc:
            error = api_error(exc, f"namespaces/{SERVING_NAMESPACE}")
            raise HookUnavailableError(
                "unknown",
                f"cannot read Knative Serving's version ({error}); state it in the config "
                "(adapter.serving_version, e.g. '1.23') or with --serving-version",
            ) from None
        labels = (namespace.metadata.labels or {}) if namespace.metadata else {}
        for label in _VERSION_LABELS:
            if labels.get(label):
                return str(labels[label])
        raise HookUnavailableError(
            "unknown",
            f"namespace {SERVING_NAMESPACE} has no version label; state it in the config "
            "(adapter.serving_version) or with --serving-version",
        )

    def check_hook(self) -> None:
        """Raise :class:`HookUnavailableError` unless the cluster runs Knative >= 1.21."""
        version = self.serving_version()
        parsed = parse_version(version)
        if parsed is None:
            raise HookUnavailableError(version, "cannot parse it; use --serving-version")
        if parsed < HOOK_SINCE:
            raise HookUnavailableError(version)

    def set_min_scale(self, name: str, replicas: int | None) -> Obj:
        """Pin the latest ready Revision's min-scale (None returns to the template's).

        Patches only that Revision's metadata: no new revision is made.
        """
        if replicas is not None and replicas < 0:
            raise ValueError(f"min-scale must be non-negative, got {replicas}")
        self.check_hook()
        revision = self.latest_ready_revision(name)
        revision_name = revision["metadata"]["name"]
        annotations = revision["metadata"].get("annotations", {}) or {}
        max_scale = int(annotations.get(MAX_SCALE, "0") or 0)
        if replicas is not None and max_scale > 0 and replicas > max_scale:
            raise ValueError(f"min-scale {replicas} exceeds {name}'s max-scale {max_scale}")
        value = str(replicas) if replicas is not None else self._template_min_scale(name)
        patch = {"metadata": {"annotations": {MIN_SCALE: value}}}
        logger.info("min-scale of %s (%s) -> %s", name, revision_name, value)
        return self._serving("patch", "revisions", revision_name, body=patch)

    def serving_revisions(self, name: str) -> list[str]:
        """The revisions that carry traffic (``status.traffic`` entries with a share), else the
        latest ready one."""
        service = self.get(name)
        names = [
            str(entry["revisionName"])
            for entry in service.get("status", {}).get("traffic", []) or []
            if entry.get("revisionName") and (entry.get("percent") or 0) > 0
        ]
        if names:
            return list(dict.fromkeys(names))
        return [str(self.latest_ready_revision(name)["metadata"]["name"])]

    def set_scale(
        self,
        name: str,
        replicas: int | None,
        *,
        owner: str = "",
        lease_s: float | None = None,
        now: float | None = None,
    ) -> list[Obj]:
        """Own the replica count of every revision that serves ``name``, as ``owner``'s share.

        Each owner (an adapter, by its frontend id) records its count and when its lease ends
        in an annotation of its own (``scale.slackwise.dev/<owner>: "<count>@<epoch s>"``), so
        an adapter that dies stops counting when its lease runs out. The revision then runs the
        largest live share: min-scale and max-scale set together (max-scale at least 1, so a
        request at zero still wakes one), which Knative >= 1.21 passes straight to the
        PodAutoscaler. None withdraws ``owner``'s share; with none left the template's own
        annotations come back. Only Revision metadata is patched: no new revision is made;
        owners write again every few seconds, so a new revision gets the count too.
        """
        if replicas is not None and (isinstance(replicas, bool) or replicas < 0):
            raise ValueError(f"scale must be a non-negative integer, got {replicas}")
        if lease_s is not None and not lease_s > 0:
            raise ValueError(f"lease_s must be positive, got {lease_s!r}")
        self.check_hook()
        wall = time.time() if now is None else now
        template = self.get(name).get("spec", {}).get("template", {})
        defaults = template.get("metadata", {}).get("annotations", {}) or {}
        limit = int(defaults.get(MAX_SCALE, "0") or 0)
        if replicas is not None and limit > 0 and replicas > limit:
            raise ValueError(f"scale {replicas} exceeds {name}'s max-scale {limit}")
        patched = []
        for revision_name in self.serving_revisions(name):
            revision = self._serving("get", "revisions", revision_name)
            current = revision.get("metadata", {}).get("annotations", {}) or {}
            values = scale_annotations(
                current, defaults, owner=owner, replicas=replicas, lease_s=lease_s, now=wall
            )
            logger.info("scale of %s (%s) -> %s", name, revision_name, values)
            patch = {"metadata": {"annotations": values}}
            patched.append(self._serving("patch", "revisions", revision_name, body=patch))
        return patched

    def _template_min_scale(self, name: str) -> str | None:
        template = self.get(name).get("spec", {}).get("template", {})
        value = template.get("metadata", {}).get("annotations", {}).get(MIN_SCALE)
        return str(value) if value is not None else None

    def _own(self, service: Mapping[str, Any]) -> Obj:
        body = json.loads(json.dumps(service))
        if not isinstance(body, dict) or not body.get("metadata", {}).get("name"):
            raise ValueError("a Knative Service needs metadata.name")
        body.setdefault("apiVersion", f"{SERVING_GROUP}/{SERVING_VERSION}")
        body.setdefault("kind", "Service")
        body["metadata"]["namespace"] = self.namespace
        return body
