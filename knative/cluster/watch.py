"""Watches instead of polling: the namespace's Services, Revisions and PodAutoscalers, kept in a
local cache by three long-lived ``watch=true`` streams of the official ``kubernetes`` client.

Polling asked the API server four questions per function every two seconds (the Service for its
URL, again for its ready revision, the Revision, its PodAutoscaler); a watch asks once per kind
and hears every change as it happens. :class:`ServingWatch` lists each kind, then follows it
from the list's ``resourceVersion``; a stream that ends (the server's ``timeoutSeconds``) is
resumed from the last version seen, one that fails is re-listed after a backoff. What it knows
is answered by :meth:`ServingWatch.url` and :meth:`ServingWatch.replicas` without a call.

A Role without ``list`` and ``watch`` on the three kinds makes :meth:`ServingWatch.start`
raise :class:`~knative.cluster.errors.AccessDeniedError`; the view then polls as before.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from knative.cluster.errors import api_error
from knative.local.events import ReplicaCounts
from slackwise_core.scaling_values import MIN_SCALE

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

SERVING = ("serving.knative.dev", "v1")
AUTOSCALING = ("autoscaling.internal.knative.dev", "v1alpha1")
#: each watched kind: (group, version, plural)
KINDS = (
    (*SERVING, "services"),
    (*SERVING, "revisions"),
    (*AUTOSCALING, "podautoscalers"),
)


def replica_counts(
    revision: Mapping[str, Any], autoscaler: Mapping[str, Any] | None
) -> ReplicaCounts:
    """A revision's replicas: its PodAutoscaler's scales where known, else the revision's own
    status; ``min_scale`` from the revision's annotation."""
    status = revision.get("status", {}) or {}
    ready = int(status.get("actualReplicas", 0) or 0)
    desired = int(status.get("desiredReplicas", ready) or 0)
    if autoscaler is not None:
        scales = autoscaler.get("status", {}) or {}
        ready = int(scales.get("actualScale", ready) or 0)
        desired = int(scales.get("desiredScale", desired) or 0)
    annotations = revision.get("metadata", {}).get("annotations", {}) or {}
    return ReplicaCounts(
        ready=ready,
        starting=max(0, desired - ready),
        draining=max(0, ready - desired),
        desired=desired,
        min_scale=int(annotations.get(MIN_SCALE, "0") or 0),
    )


def service_url(service: Mapping[str, Any], *, cluster_local: bool) -> str:
    """``status.address.url`` (inside the cluster) or ``status.url``, the other as fallback."""
    status = service.get("status", {}) or {}
    public = str(status.get("url", "") or "")
    local = str((status.get("address", {}) or {}).get("url", "") or "")
    return (local or public) if cluster_local else (public or local)


class ServingWatch:
    """The namespace's serving objects, followed by watches in background threads."""

    def __init__(
        self,
        api_client: k8s.ApiClient,
        namespace: str,
        *,
        timeout_s: int = 60,
        backoff_s: float = 1.0,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.namespace = namespace
        self._objects = k8s.CustomObjectsApi(api_client)
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._on_change = on_change
        self._cache: dict[str, dict[str, Obj]] = {plural: {} for *_, plural in KINDS}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._responses: dict[str, Any] = {}

    # -- answers from the cache ----------------------------------------------------------------

    def get(self, plural: str, name: str) -> Obj | None:
        with self._lock:
            return self._cache[plural].get(name)

    def url(self, service: str, *, cluster_local: bool) -> str:
        found = self.get("services", service)
        return service_url(found, cluster_local=cluster_local) if found else ""

    def replicas(self, service: str) -> ReplicaCounts | None:
        """The latest ready revision's counts, or None while the cache does not know them."""
        found = self.get("services", service)
        name = (found or {}).get("status", {}).get("latestReadyRevisionName")
        revision = self.get("revisions", name) if name else None
        if revision is None:
            return None
        return replica_counts(revision, self.get("podautoscalers", name))

    # -- the streams ---------------------------------------------------------------------------

    def start(self) -> None:
        """List every kind once (raising the client's error, e.g. a 403, before any thread
        starts), then follow each from its list's version in a thread of its own."""
        versions = {}
        for group, version, plural in KINDS:
            try:
                versions[plural] = self._list(group, version, plural)
            except ApiException as exc:
                raise api_error(exc, f"{plural}.{group} in namespace {self.namespace}") from None
        for group, version, plural in KINDS:
            thread = threading.Thread(
                target=self._follow,
                args=(group, version, plural, versions[plural]),
                name=f"watch-{plural}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """End the streams (an open one is shut down at once) and wait for the threads."""
        self._stopping.set()
        with self._lock:
            responses = list(self._responses.values())
        for response in responses:
            with contextlib.suppress(Exception):
                response.shutdown()
        for thread in self._threads:
            thread.join(timeout=self._timeout_s + 5.0)
        self._threads.clear()

    def _list(self, group: str, version: str, plural: str) -> str:
        answer: Any = self._objects.list_namespaced_custom_object(
            group, version, self.namespace, plural
        )
        items = {item["metadata"]["name"]: item for item in answer.get("items", [])}
        with self._lock:
            self._cache[plural] = items
        self._changed()
        return str(answer.get("metadata", {}).get("resourceVersion", "") or "")

    def _follow(self, group: str, version: str, plural: str, since: str) -> None:
        while not self._stopping.is_set():
            try:
                since = self._stream(group, version, plural, since)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                logger.info("watch of %s ended (%s); listing again", plural, exc)
                if self._stopping.wait(self._backoff_s):
                    return
                with contextlib.suppress(Exception):
                    since = self._list(group, version, plural)

    def _stream(self, group: str, version: str, plural: str, since: str) -> str:
        response: Any = self._objects.list_namespaced_custom_object(
            group,
            version,
            self.namespace,
            plural,
            watch=True,
            resource_version=since or None,
            timeout_seconds=self._timeout_s,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=self._timeout_s + 10,
        )
        with self._lock:
            self._responses[plural] = response
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if not line:
                    continue
                event = json.loads(line)
                since = self._apply(plural, event) or since
        finally:
            with self._lock:
                self._responses.pop(plural, None)
            response.release_conn()
        return since

    def _apply(self, plural: str, event: Mapping[str, Any]) -> str:
        """One event into the cache; the version it carries."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":  # e.g. 410 Gone: the version is too old, list again
            raise RuntimeError(obj.get("message", "watch error"))
        metadata = obj.get("metadata", {})
        if kind != "BOOKMARK":
            with self._lock:
                if kind == "DELETED":
                    self._cache[plural].pop(metadata.get("name", ""), None)
                else:
                    self._cache[plural][metadata.get("name", "")] = obj
            self._changed()
        return str(metadata.get("resourceVersion", "") or "")

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()
