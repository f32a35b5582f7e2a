"""The in-memory API server's toy controller: what Knative's controllers would do to the store.

When a Service is created or its spec changes it bumps ``metadata.generation`` and makes Revision
``NAME-0000N`` plus a PodAutoscaler of the same name, then sets the Service's status (conditions,
``url``, ``address.url``, latest revision names, traffic). A new revision is Ready at once, or
``ready_after_s`` later (``Ready=Unknown`` until then), or as :meth:`set_outcome` says. A min-scale
on a Revision reaches its PodAutoscaler's desired scale. Mixed into
:class:`tests.kube.fake_api.FakeKubernetes`; every method runs with its lock held.
"""

from __future__ import annotations

import copy
import itertools
import time
from typing import Any

from slackwise_core.scaling_values import MIN_SCALE

__all__ = ["SERVING", "ToyController", "matches", "merge_patch", "parse_selector"]

SERVING = "serving.knative.dev"
AUTOSCALING = "autoscaling.internal.knative.dev"
Obj = dict[str, Any]


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


class ToyController:
    """The store's controller half (see the module docstring)."""

    _objects: dict[tuple[str, str, str], Obj]
    _outcomes: dict[str, tuple[str, str, str]]
    _becoming_ready: dict[tuple[str, str], tuple[float, str]]
    _versions: itertools.count[int]
    ready_after_s: float
    domain: str

    def _settle(self) -> None:
        """Revisions whose ``ready_after_s`` has passed become Ready, and their Service."""
        now = time.monotonic()
        for (namespace, revision_name), (when, service) in list(self._becoming_ready.items()):
            if when > now:
                continue
            del self._becoming_ready[(namespace, revision_name)]
            revision = self._objects.get(("revisions", namespace, revision_name))
            owner = self._objects.get(("services", namespace, service))
            if revision is None or owner is None:
                continue
            revision["status"]["conditions"] = [_condition("ready", "", "")]
            revision["status"]["actualReplicas"] = revision["status"]["desiredReplicas"]
            self._bump(revision)
            autoscaler = self._objects.get(("podautoscalers", namespace, revision_name))
            if autoscaler is not None:
                autoscaler["status"]["actualScale"] = autoscaler["status"]["desiredScale"]
                self._bump(autoscaler)
            status = owner.setdefault("status", {})
            if status.get("latestCreatedRevisionName") == revision_name:
                self._mark_ready(owner, namespace, revision_name)
            self._bump(owner)

    def _mark_ready(self, service: Obj, namespace: str, revision_name: str) -> None:
        name = service["metadata"]["name"]
        status = service.setdefault("status", {})
        status["latestReadyRevisionName"] = revision_name
        status["url"] = f"http://{name}.{namespace}.{self.domain}"
        status["traffic"] = [{"revisionName": revision_name, "percent": 100}]
        status["conditions"] = [_condition("ready", "", "")]

    def _bump(self, obj: Obj) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def _deleted(self, plural: str, obj: Obj) -> None:
        """A hook for the watches: ``obj`` is gone."""

    def _delete(self, namespace: str, plural: str, name: str) -> None:
        self._deleted(plural, self._objects.pop((plural, namespace, name)))
        if plural != "services":
            return
        for key, obj in list(self._objects.items()):
            labels = obj["metadata"].get("labels", {})
            if key[1] == namespace and labels.get(f"{SERVING}/service") == name:
                self._deleted(key[0], self._objects.pop(key))
                autoscaler = self._objects.pop(("podautoscalers", namespace, key[2]), None)
                if autoscaler is not None:
                    self._deleted("podautoscalers", autoscaler)

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
        later = outcome == "ready" and self.ready_after_s > 0
        if later:  # Ready=Unknown until the delay passes (see _settle)
            self._becoming_ready[(namespace, revision_name)] = (
                time.monotonic() + self.ready_after_s,
                name,
            )
            outcome, reason, message = "pending", "Deploying", ""
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
            self._mark_ready(service, namespace, revision_name)
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


def parse_selector(text: str) -> dict[str, str]:
    terms = [t for t in text.split(",") if t]
    return dict(t.split("=", 1) for t in terms)


def matches(obj: Obj, selector: dict[str, str]) -> bool:
    labels = obj.get("metadata", {}).get("labels", {})
    return all(labels.get(k) == v for k, v in selector.items())
