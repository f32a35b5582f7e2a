"""The KnativeClient flow against a real cluster with Knative Serving.

Skipped unless ``KUBECONFIG`` is set. ``SLACKWISE_TEST_NAMESPACE`` (default ``default``) and
``SLACKWISE_TEST_IMAGE`` (default Knative's hello-world sample) choose where and what to run.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from knative.cluster.client import MIN_SCALE, KnativeClient, parse_version
from knative.cluster.connection import connect
from knative.cluster.errors import HookUnavailableError, ResourceNotFoundError
from knative.cluster.view import KnativeView

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not os.environ.get("KUBECONFIG"), reason="needs KUBECONFIG"),
]

IMAGE = os.environ.get("SLACKWISE_TEST_IMAGE", "ghcr.io/knative/helloworld-go:latest")
NAMESPACE = os.environ.get("SLACKWISE_TEST_NAMESPACE", "default")


def _service(name: str, target: str) -> dict[str, Any]:
    container = {"image": IMAGE, "env": [{"name": "TARGET", "value": target}]}
    return {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "slackwise"}},
        "spec": {
            "template": {
                "metadata": {"annotations": {MIN_SCALE: "0"}},
                "spec": {"containers": [container]},
            }
        },
    }


@pytest.fixture
def client() -> KnativeClient:
    return connect(NAMESPACE)


@pytest.fixture
def name(client: KnativeClient) -> Iterator[str]:
    name = f"slackwise-live-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(ResourceNotFoundError):
        client.delete(name)


def test_deploy_scale_and_delete(client: KnativeClient, name: str) -> None:
    lines: list[str] = []
    _, changed = client.apply(_service(name, "one"))
    assert changed
    client.wait_ready(name, 300.0, lines.append)
    assert lines[-1] == f"{name}: Ready=True"
    assert client.url(name).startswith("http")
    first = [r["metadata"]["name"] for r in client.revisions(name)]
    assert len(first) == 1

    _, changed = client.apply(_service(name, "one"))
    assert not changed
    assert [r["metadata"]["name"] for r in client.revisions(name)] == first

    version = parse_version(client.serving_version())
    if version is not None and version >= (1, 21):
        client.set_min_scale(name, 1)
        revision = client.latest_ready_revision(name)
        assert revision["metadata"]["annotations"][MIN_SCALE] == "1"
        assert [r["metadata"]["name"] for r in client.revisions(name)] == first
    else:
        with pytest.raises(HookUnavailableError):
            client.set_min_scale(name, 1)

    view = KnativeView(client, [name])
    view.refresh()
    assert view.url(name) == client.url(name)
    assert view.replicas(name).desired >= 0

    _, changed = client.apply(_service(name, "two"))
    assert changed
    client.wait_ready(name, 300.0)
    assert len(client.revisions(name)) == 2

    client.delete(name)
    with pytest.raises(ResourceNotFoundError):
        client.delete(name)
