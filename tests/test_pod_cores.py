"""ROMA's cores on Kubernetes: in-place pod resize through the official client, under the
generated Role, against the in-memory API server's pods (tests.kube.fake_pods)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from knative.cluster.client import KnativeClient
from knative.cluster.errors import AccessDeniedError
from knative.cluster.manifests import function_service, rbac_objects
from knative.cluster.pod_cores import PodCores, ResizeUnavailableError, millicores
from slackwise_config import parse_config
from tests.kube.fake_api import FakeKubernetes
from tests.kube.fake_pods import cpu_cores, qos_class

NS = "ml"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeKubernetes]:
    with FakeKubernetes() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeKubernetes) -> Iterator[FakeKubernetes]:
    server.reset()
    server.kubernetes_version = "1.33.1"
    server.node_cores = 4.0
    (role,) = [o for o in rbac_objects(NS) if o["kind"] == "Role"]
    server.enforce(role)
    try:
        yield server
    finally:
        server.enforce(None)


def _deploy(fake: FakeKubernetes, replicas: int, resources: dict[str, Any] | None = None) -> None:
    function: dict[str, Any] = {
        "model": "digits",
        "threads": 1,
        "annotations": {"autoscaling.knative.dev/min-scale": str(replicas)},
    }
    if resources:
        function["resources"] = resources
    config = parse_config({"functions": {"digits": function}})
    fake.enforce(None)  # deploying is the operator's, not the adapter's
    with fake.api_client() as api:
        KnativeClient(api, NS, serving_version="1.23.0").apply(
            function_service(config.functions["digits"])
        )
    (role,) = [o for o in rbac_objects(NS) if o["kind"] == "Role"]
    fake.enforce(role)


def _pods(fake: FakeKubernetes) -> list[dict[str, Any]]:
    fake.enforce(None)
    with fake.api_client() as api:
        pods = PodCores(api, NS).pods("digits")
    (role,) = [o for o in rbac_objects(NS) if o["kind"] == "Role"]
    fake.enforce(role)
    return pods


def _function(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "function"]
    return dict(container)


def test_cores_are_split_over_the_running_pods_and_applied_in_place(
    fake: FakeKubernetes,
) -> None:
    _deploy(fake, replicas=2)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in _pods(fake)}
    assert len(before) == 2
    with fake.api_client() as api:
        results = PodCores(api, NS).set_cores("digits", 1.5)
    assert sorted(r.pod for r in results) == sorted(before)
    assert all(r.asked == "750m" and r.applied == "750m" and r.done for r in results)
    after = _pods(fake)
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in after} == before  # no restart
    for pod in after:
        resources = _function(pod)["resources"]
        assert resources["requests"]["cpu"] == "750m"
        # no CPU limit (only the measured memory's): the pod stays Burstable
        assert "cpu" not in resources.get("limits", {})
        assert pod["status"]["qosClass"] == "Burstable"
    assert not fake.denied  # the generated Role is enough


def test_a_guaranteed_pod_moves_its_limit_with_its_request(fake: FakeKubernetes) -> None:
    both = {"cpu": "1", "memory": "512Mi"}
    _deploy(fake, replicas=1, resources={"requests": both, "limits": both})
    (pod,) = _pods(fake)
    assert pod["status"]["qosClass"] == "Guaranteed"
    with fake.api_client() as api:
        (result,) = PodCores(api, NS).set_cores("digits", 0.25)
    assert result.done and result.applied == "250m"
    (pod,) = _pods(fake)
    resources = _function(pod)["resources"]
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == "250m"
    assert resources["limits"]["memory"] == "512Mi"
    assert pod["status"]["qosClass"] == "Guaranteed"


def test_a_resize_beyond_the_node_stays_pending_with_the_kubelets_reason(
    fake: FakeKubernetes,
) -> None:
    _deploy(fake, replicas=2)
    with fake.api_client() as api:
        cores = PodCores(api, NS)
        infeasible = cores.set_cores("digits", 10.0)  # 5 cores a pod on a 4-core node
        assert {r.pending for r in infeasible} == {"Infeasible"}
        assert not any(r.done for r in infeasible)
        assert all(r.applied == "1" for r in infeasible)  # still what the template asked
        fake.node_cores = 3.0
        deferred = cores.set_cores("digits", 4.0)  # 2 each: the first fits, the second waits
        assert [r.pending for r in deferred] == ["", "Deferred"]
        assert "allocatable left" in deferred[1].message
        done = cores.set_cores("digits", 2.0)
    assert all(r.done for r in done)


def test_an_older_cluster_is_refused_with_the_version_it_runs(fake: FakeKubernetes) -> None:
    _deploy(fake, replicas=1)
    fake.kubernetes_version = "1.32.4"
    with fake.api_client() as api, pytest.raises(ResizeUnavailableError) as caught:
        PodCores(api, NS).set_cores("digits", 1.0)
    assert "Kubernetes >= 1.33" in str(caught.value) and "v1.32.4" in str(caught.value)


def test_a_role_without_pods_resize_is_a_clear_access_error(fake: FakeKubernetes) -> None:
    _deploy(fake, replicas=1)
    fake.enforce({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    with fake.api_client() as api, pytest.raises(AccessDeniedError) as caught:
        PodCores(api, NS).set_cores("digits", 1.0)
    assert "pods/resize" in str(caught.value)
    assert fake.denied and fake.denied[-1][0] == "patch"


def test_the_api_refuses_what_a_resize_may_not_change(fake: FakeKubernetes) -> None:
    _deploy(fake, replicas=1)
    (pod,) = _pods(fake)
    name = pod["metadata"]["name"]
    fake.enforce(None)
    requests = _function(pod)["resources"]["requests"]
    with fake.api_client() as api:
        core = k8s.CoreV1Api(api)
        strategic = "application/strategic-merge-patch+json"
        cases = [
            ({"spec": {"containers": [{"name": "function", "image": "other:1"}]}}, strategic),
            ({"spec": {"containers": [{"name": "function", "resources": {
                "limits": dict(requests)}}]}}, strategic),  # limits = requests: -> Guaranteed
            ({"spec": {"containers": [{"name": "function", "resources": {
                "requests": {"nvidia.com/gpu": "1"}}}]}}, strategic),
            ({"spec": {"containers": [{"name": "function", "resources": {
                "requests": {"cpu": "2"}}}]}}, "application/merge-patch+json"),  # drops the image
            ({"metadata": {"labels": {"a": "b"}}}, strategic),
        ]  # fmt: skip
        for body, content_type in cases:
            with pytest.raises(ApiException) as caught:
                core.patch_namespaced_pod_resize(name, NS, body, _content_type=content_type)
            assert caught.value.status == 422, body
    (unchanged,) = _pods(fake)
    assert _function(unchanged) == _function(pod)


def test_quantities_and_qos_classes() -> None:
    assert millicores(1.5) == "1500m" and millicores(0.0001) == "1m"
    for bad in (0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="cores must be a positive number"):
            millicores(bad)
    assert [cpu_cores(q) for q in ("1", "1.5", "750m", 2)] == [1.0, 1.5, 0.75, 2.0]
    assert qos_class([{"resources": {}}]) == "BestEffort"
    assert qos_class([{"resources": {"requests": {"cpu": "1"}}}]) == "Burstable"
    both = {"cpu": "1", "memory": "1Gi"}
    assert qos_class([{"resources": {"requests": both, "limits": both}}]) == "Guaranteed"
    assert qos_class([{"resources": {"limits": both}}]) == "Guaranteed"  # requests default


def test_the_adapters_knative_view_sets_cores_through_the_resize(fake: FakeKubernetes) -> None:
    """What ``adapter.cores`` calls on Knative: the view resizes the function's pods in place;
    a cluster without the resize is PinUnsupported (the loop warns once and stops)."""
    import asyncio

    from knative.cluster.view import KnativeView
    from slackwise_core.platform_errors import PinUnsupported

    _deploy(fake, replicas=2)
    with fake.api_client() as api:
        view = KnativeView(KnativeClient(api, NS, serving_version="1.23.0"), ["digits"],
                           watch=False)  # fmt: skip
        asyncio.run(view.set_cores("digits", 1.5))
        assert [cpu_cores(_function(p)["resources"]["requests"]["cpu"])
                for p in _pods(fake)] == [0.75, 0.75]  # fmt: skip
        asyncio.run(view.set_cores("digits", None))  # a pod's CPU is resized, never unset
        fake.kubernetes_version = "1.32.4"
        old = KnativeView(KnativeClient(api, NS, serving_version="1.23.0"), ["digits"],
                          watch=False)  # fmt: skip
        with pytest.raises(PinUnsupported, match=r"needs Kubernetes >= 1\.33"):
            asyncio.run(old.set_cores("digits", 1.0))
