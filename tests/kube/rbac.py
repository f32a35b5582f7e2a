"""Kubernetes RBAC rules, evaluated: does a Role allow a verb on a resource?

The in-memory API server (:mod:`tests.kube.fake_api`) enforces the Role that
``slackwise manifests`` generates with this, so a call the adapter makes outside its Role is a
403 in the tests, as on a cluster. Rules follow Kubernetes' matching: ``apiGroups``,
``resources`` (``*`` and ``resource/subresource``), ``verbs`` (``*``) and ``resourceNames``; a
namespaced Role never grants a cluster-scoped resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["allows", "verb_for"]


def verb_for(method: str, *, named: bool, watch: bool = False) -> str:
    """The RBAC verb of an HTTP request: GET on a collection lists, on an object gets."""
    method = method.upper()
    if method == "GET":
        return "watch" if watch else ("get" if named else "list")
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def _match(allowed: Sequence[str], value: str) -> bool:
    return "*" in allowed or value in allowed


def allows(
    rules: Sequence[Mapping[str, Any]],
    *,
    group: str,
    resource: str,
    verb: str,
    name: str | None = None,
    cluster_scoped: bool = False,
) -> bool:
    """Whether any of a namespaced Role's ``rules`` grants ``verb`` on ``resource``."""
    if cluster_scoped:
        return False
    for rule in rules:
        if not _match(rule.get("apiGroups", ()), group):
            continue
        if not _match(rule.get("resources", ()), resource):
            continue
        if not _match(rule.get("verbs", ()), verb):
            continue
        names = rule.get("resourceNames") or ()
        if names and (name is None or name not in names):
            continue
        return True
    return False
