"""KnativeClient, KnativeView and the deploy CLI against the in-memory fake API server."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knative.cluster import cli as cluster
from knative.cluster.client import MAX_SCALE, MIN_SCALE, KnativeClient
from knative.cluster.crd_schema import knative_dir
from knative.cluster.errors import (
    AccessDeniedError,
    HookUnavailableError,
    InvalidResourceError,
    ReadyTimeoutError,
    ResourceConflictError,
    ResourceNotFoundError,
    ServiceNotReadyError,
)
from knative.cluster.view import KnativeView
from knative.local.events import ReplicaCounts
from slackwise_config import load_config
from tests.kube.fake_api import FakeKubernetes

NS = "ml"


def service(name: str, image: str = "registry.local/asr:1", min_scale: str = "0") -> dict[str, Any]:
    return {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "slackwise"}},
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {MIN_SCALE: min_scale, "autoscaling.knative.dev/max-scale": "5"}
                },
                "spec": {"containerConcurrency": 4, "containers": [{"image": image}]},
            }
        },
    }


@pytest.fixture(scope="module")
def server() -> Iterator[FakeKubernetes]:
    with FakeKubernetes() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeKubernetes) -> Iterator[FakeKubernetes]:
    server.reset()
    server.serving_version = "1.23.0"
    yield server


@pytest.fixture
def client(fake: FakeKubernetes) -> Iterator[KnativeClient]:
    with fake.api_client() as api:
        yield KnativeClient(api, NS)


def test_apply_creates_the_service_and_its_first_revision(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    created, changed = client.apply(service("asr"))
    assert changed
    assert created["metadata"]["namespace"] == NS
    assert fake.names("services", NS) == ["asr"]
    assert fake.names("revisions", NS) == ["asr-00001"]
    assert fake.names("podautoscalers", NS) == ["asr-00001"]


def test_reapply_is_idempotent_and_a_spec_change_makes_a_new_revision(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    client.apply(service("asr"))
    version = fake.get("services", NS, "asr")
    assert version is not None
    _, changed = client.apply(service("asr"))
    assert not changed
    assert fake.names("revisions", NS) == ["asr-00001"]
    assert fake.get("services", NS, "asr") == version  # a no-op apply: nothing was written

    _, changed = client.apply(service("asr", image="registry.local/asr:2"))
    assert changed
    assert fake.names("revisions", NS) == ["asr-00001", "asr-00002"]
    assert client.get("asr")["status"]["latestReadyRevisionName"] == "asr-00002"


def test_server_defaults_do_not_count_as_a_change(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    client.apply(service("asr"))
    defaults = {
        "metadata": {"annotations": {"serving.knative.dev/creator": "admin"}},
        "spec": {"template": {"spec": {"timeoutSeconds": 300}}},
    }
    fake.merge("services", NS, "asr", defaults)
    _, changed = client.apply(service("asr"))
    assert not changed
    assert fake.names("revisions", NS) == ["asr-00001"]


def test_wait_ready_reports_progress_and_returns_the_service(client: KnativeClient) -> None:
    client.apply(service("asr"))
    lines: list[str] = []
    ready = client.wait_ready("asr", 5.0, lines.append, poll_s=0.01)
    assert lines == ["asr: Ready=True"]
    assert ready["status"]["url"] == "http://asr.ml.example.com"


def test_wait_ready_timeout_names_the_condition_reason(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    fake.set_outcome("asr", "pending")
    client.apply(service("asr"))
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(ReadyTimeoutError) as caught:
        client.wait_ready("asr", 3.0, poll_s=1.0, clock=lambda: now[0], sleep=sleep)
    assert caught.value.reason == "RevisionMissing"
    assert "not ready after 3 s: RevisionMissing" in str(caught.value)
    assert "waiting for a Revision" in str(caught.value)


def test_wait_ready_fails_fast_on_ready_false(fake: FakeKubernetes, client: KnativeClient) -> None:
    fake.set_outcome(
        "asr", "failed", reason="ContainerMissing", message='Unable to fetch image "nope"'
    )
    client.apply(service("asr", image="nope"))
    with pytest.raises(ServiceNotReadyError) as caught:
        client.wait_ready("asr", 5.0, poll_s=0.01)
    assert not isinstance(caught.value, ReadyTimeoutError)
    assert caught.value.reason == "RevisionMissing"
    assert "Unable to fetch image" in caught.value.message


def test_set_min_scale_patches_the_revision_and_makes_no_new_revision(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    client.apply(service("asr"))
    generation = client.get("asr")["metadata"]["generation"]
    client.set_min_scale("asr", 3)
    revision = fake.get("revisions", NS, "asr-00001")
    assert revision is not None
    assert revision["metadata"]["annotations"][MIN_SCALE] == "3"
    assert fake.names("revisions", NS) == ["asr-00001"]
    assert client.get("asr")["metadata"]["generation"] == generation
    assert client.ready_replicas("asr").min_scale == 3

    client.set_min_scale("asr", None)
    revision = fake.get("revisions", NS, "asr-00001")
    assert revision is not None
    assert revision["metadata"]["annotations"][MIN_SCALE] == "0"


def test_set_min_scale_checks_its_bounds(client: KnativeClient) -> None:
    client.apply(service("asr"))
    with pytest.raises(ValueError, match="non-negative"):
        client.set_min_scale("asr", -1)
    with pytest.raises(ValueError, match="exceeds asr's max-scale 5"):
        client.set_min_scale("asr", 6)


@pytest.mark.parametrize("version", ["1.20.3", "v0.26.0"])
def test_older_knative_refuses_the_hook(
    fake: FakeKubernetes, client: KnativeClient, version: str
) -> None:
    fake.serving_version = version
    client.apply(service("asr"))
    with pytest.raises(HookUnavailableError, match=rf"Knative {version} \(needs >= 1.21\)"):
        client.set_min_scale("asr", 2)
    revision = fake.get("revisions", NS, "asr-00001")
    assert revision is not None
    assert revision["metadata"]["annotations"][MIN_SCALE] == "0"
    assert not [r for r in fake.requests if r[0] == "PATCH" and "/revisions/" in r[1]]


def test_unknown_version_is_refused_unless_stated(fake: FakeKubernetes) -> None:
    fake.serving_version = None
    with fake.api_client() as api:
        unknown = KnativeClient(api, NS)
        unknown.apply(service("asr"))
        with pytest.raises(HookUnavailableError, match="--serving-version"):
            unknown.set_min_scale("asr", 2)
        stated = KnativeClient(api, NS, serving_version="v1.21.0")
        stated.set_min_scale("asr", 2)
    revision = fake.get("revisions", NS, "asr-00001")
    assert revision is not None
    assert revision["metadata"]["annotations"][MIN_SCALE] == "2"


def test_api_errors_name_the_resource_and_the_api_message(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    with pytest.raises(ResourceNotFoundError) as missing:
        client.delete("ghost")
    assert missing.value.status == 404
    assert "services.serving.knative.dev/ghost in namespace ml: 404 NotFound" in str(missing.value)

    client.apply(service("asr"))
    with pytest.raises(ResourceConflictError, match=r'AlreadyExists.*"asr" already exists'):
        client.create(service("asr"))

    fake.forbid("services", name="nlu")
    with pytest.raises(AccessDeniedError) as denied:
        client.apply(service("nlu"))
    assert denied.value.status == 403
    assert "services.serving.knative.dev/nlu" in str(denied.value)
    assert "cannot" in denied.value.message

    fake.fail("services", 422, "Invalid", "spec.template: bad container", name="qa")
    with pytest.raises(InvalidResourceError, match="bad container"):
        client.create(service("qa"))


def test_replica_counts_fall_back_to_the_revision_when_podautoscalers_are_forbidden(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    client.apply(service("asr", min_scale="2"))
    fake.forbid("podautoscalers")
    counts = client.ready_replicas("asr")
    assert (counts.ready, counts.desired, counts.min_scale) == (2, 2, 2)


@pytest.mark.parametrize("watch", [True, False], ids=["watch", "poll"])
def test_view_answers_url_and_replicas_from_its_watch_or_its_poll(
    fake: FakeKubernetes, client: KnativeClient, watch: bool
) -> None:
    client.apply(service("asr"))
    view = KnativeView(client, ["asr"], poll_s=0.01, watch=watch)
    calls: list[int] = []

    async def follow() -> None:
        await view.start()
        assert view.url("asr") == "http://asr.ml.svc.cluster.local"  # status.address.url
        assert view.replicas("asr").ready == 1
        before = len(fake.requests)
        client.set_min_scale("asr", 4)
        calls.append(len(fake.requests) - before)
        for _ in range(300):
            if view.replicas("asr").desired == 4:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # some refreshes more
        calls.append(len(fake.requests) - before)
        await view.stop()

    asyncio.run(follow())
    counts = view.replicas("asr")
    assert (counts.ready, counts.starting, counts.desired, counts.min_scale) == (1, 3, 4, 4)
    assert view.replicas("unknown").ready == 0
    pinned, followed = calls
    if watch:  # the change came down the open streams: no call of the view's own
        assert followed == pinned
    else:  # every refresh asks again
        assert followed > pinned + 4


def test_a_watch_follows_new_revisions_and_deletions_and_resumes_after_its_timeout(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    import time

    from knative.cluster.watch import ServingWatch

    client.apply(service("asr"))
    watch = ServingWatch(client.api_client, NS, timeout_s=1)  # streams end every second

    def until(check: Any) -> bool:
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if check():
                return True
            time.sleep(0.01)
        return False

    watch.start()
    try:
        assert watch.replicas("asr") is not None
        time.sleep(1.3)  # past the first timeout: the streams resumed from their version
        client.apply(service("asr", image="registry.local/asr:2", min_scale="2"))
        assert until(lambda: (watch.replicas("asr") or ReplicaCounts(0, 0, 0, 0, 0)).min_scale == 2)
        assert watch.get("revisions", "asr-00002") is not None
        client.delete("asr")
        assert until(lambda: watch.get("services", "asr") is None)
        assert until(lambda: watch.get("revisions", "asr-00001") is None)
        assert watch.replicas("asr") is None
    finally:
        watch.stop()


def test_without_watch_in_the_role_the_view_polls_with_one_warning(
    fake: FakeKubernetes, client: KnativeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client.apply(service("asr"))
    fake.enforce({"rules": [
        {"apiGroups": ["serving.knative.dev"], "resources": ["services"], "verbs": ["get"]},
        {"apiGroups": ["serving.knative.dev"], "resources": ["revisions"], "verbs": ["get"]},
    ]})  # fmt: skip
    try:
        view = KnativeView(client, ["asr"], poll_s=0.01)

        async def run() -> None:
            await view.start()
            await asyncio.sleep(0.05)
            await view.stop()

        asyncio.run(run())
    finally:
        fake.enforce(None)
        fake.denied.clear()
    assert view.replicas("asr").ready == 1
    warnings = [r.getMessage() for r in caplog.records if "polling" in r.getMessage()]
    assert len(warnings) == 1 and "grants list and watch" in warnings[0]


def test_view_with_an_ingress_sends_the_service_host(client: KnativeClient) -> None:
    client.apply(service("asr"))
    view = KnativeView(client, ["asr"], ingress="192.0.2.10:8080")
    view.refresh()
    assert view.url("asr") == "http://192.0.2.10:8080"
    assert view.host_header("asr") == "asr.ml.example.com"
    assert view.host_header("nlu") == "nlu.ml.svc.cluster.local"


def test_cluster_local_url(client: KnativeClient) -> None:
    client.apply(service("asr"))
    assert client.url("asr", cluster_local=True) == "http://asr.ml.svc.cluster.local"


def _args(config: str = "unused.yaml") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cluster.add_deploy_arguments(parser)
    return parser.parse_args(["-c", config, "-n", NS, "--timeout-s", "5"])


def test_cli_deploy_status_delete(
    fake: FakeKubernetes,
    client: KnativeClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(
        cluster, "_services", lambda args, namespace: [service("asr"), service("nlu")]
    )
    args = _args()
    assert cluster.run_deploy(args, client) == 0
    out = capsys.readouterr().out
    assert "asr: applied" in out
    assert "nlu: Ready=True" in out
    assert "nlu: ready at http://nlu.ml.example.com" in out
    assert fake.names("services", NS) == ["asr", "nlu"]

    assert cluster.run_deploy(args, client) == 0
    assert "asr: unchanged" in capsys.readouterr().out

    assert cluster.run_status(args, client) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "READY", "URL", "REPLICAS"]
    assert table[1].split()[:3] == ["asr", "True", "http://asr.ml.example.com"]
    assert "1/1 (min 0)" in table[1]

    assert cluster.run_delete(args, client) == 0
    assert fake.names("services", NS) == []
    assert fake.names("revisions", NS) == []
    assert cluster.run_delete(args, client) == 0
    assert "asr: absent" in capsys.readouterr().out
    assert cluster.run_status(args, client) == 1


def test_cli_deploy_fails_when_a_revision_fails(
    fake: FakeKubernetes,
    client: KnativeClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cluster, "_services", lambda args, namespace: [service("asr")])
    fake.set_outcome("asr", "failed", reason="ContainerMissing", message="no image")
    assert cluster.run_deploy(_args(), client) == 1
    assert "error: service asr is not ready: RevisionMissing" in capsys.readouterr().out


def test_cli_deploy_builds_services_from_the_config(
    fake: FakeKubernetes, client: KnativeClient, capsys: pytest.CaptureFixture[str]
) -> None:
    config = Path(__file__).resolve().parents[1] / "experiments" / "local.yaml"
    names = sorted(load_config(config).functions)
    assert cluster.run_deploy(_args(str(config)), client) == 0
    assert fake.names("services", NS) == names
    capsys.readouterr()
    assert cluster.run_deploy(_args(str(config)), client) == 0
    out = capsys.readouterr().out
    assert all(f"{name}: unchanged" in out for name in names)


def test_owning_the_count_sets_min_and_max_scale_on_every_serving_revision(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    client.apply(service("asr"))
    client.apply(service("asr", image="registry.local/asr:2"))  # a second revision
    assert fake.names("revisions", NS) == ["asr-00001", "asr-00002"]
    # traffic split over both (a canary): both must carry the count
    fake.merge("services", NS, "asr", {"status": {"traffic": [
        {"revisionName": "asr-00001", "percent": 80},
        {"revisionName": "asr-00002", "percent": 20},
        {"tag": "next", "revisionName": "asr-00002", "percent": 0},
    ]}})  # fmt: skip
    client.set_scale("asr", 3)
    for name in ("asr-00001", "asr-00002"):
        revision = fake.get("revisions", NS, name)
        assert revision is not None
        annotations = revision["metadata"]["annotations"]
        assert (annotations[MIN_SCALE], annotations[MAX_SCALE]) == ("3", "3")
    client.set_scale("asr", 0)  # zero: a request can still wake one
    revision = fake.get("revisions", NS, "asr-00002")
    assert revision is not None
    assert revision["metadata"]["annotations"][MAX_SCALE] == "1"
    client.set_scale("asr", None)  # handed back: the template's own annotations
    revision = fake.get("revisions", NS, "asr-00001")
    assert revision is not None
    assert revision["metadata"]["annotations"][MIN_SCALE] == "0"
    assert revision["metadata"]["annotations"][MAX_SCALE] == "5"
    with pytest.raises(ValueError, match="exceeds asr's max-scale 5"):
        client.set_scale("asr", 6)
    assert fake.names("revisions", NS) == ["asr-00001", "asr-00002"]  # no new revision


def test_a_key_removed_from_the_config_goes_away_on_the_cluster(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    client.apply(service("asr"))
    without = service("asr")
    del without["spec"]["template"]["metadata"]["annotations"]["autoscaling.knative.dev/max-scale"]
    _, changed = client.apply(without)
    assert changed
    stored = fake.get("services", NS, "asr")
    assert stored is not None
    annotations = stored["spec"]["template"]["metadata"]["annotations"]
    assert "autoscaling.knative.dev/max-scale" not in annotations  # a merge patch would keep it
    assert fake.names("revisions", NS) == ["asr-00001", "asr-00002"]


def test_a_dry_run_is_judged_by_the_server_and_stores_nothing(
    fake: FakeKubernetes, client: KnativeClient
) -> None:
    _, changed = client.apply(service("asr"), dry_run=True)
    assert changed and fake.names("services", NS) == []
    bad = service("asr")
    bad["spec"]["template"]["spec"]["containerConcurrency"] = 5000
    with pytest.raises(InvalidResourceError, match="containerConcurrency"):
        client.apply(bad, dry_run=True)
    assert fake.names("services", NS) == []


def test_the_api_refuses_what_knatives_webhook_refuses(client: KnativeClient) -> None:
    bad = service("asr", min_scale="9")  # above its max-scale of 5
    with pytest.raises(InvalidResourceError, match="min-scale"):
        client.apply(bad)


def test_the_api_refuses_what_knatives_crd_schema_refuses(client: KnativeClient) -> None:
    if not (knative_dir() / "service.yaml").is_file():
        pytest.skip(f"Knative's CRD files are not at {knative_dir()} (set SLACKWISE_KNATIVE_DIR)")
    unknown = service("asr")
    unknown["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    with pytest.raises(InvalidResourceError, match="gpus"):
        client.apply(unknown)


def test_a_revision_is_unknown_before_it_is_ready(fake: FakeKubernetes) -> None:
    fake.ready_after_s = 0.3
    try:
        client = KnativeClient(fake.api_client(), NS, serving_version="1.23.0")
        client.apply(service("asr"))
        lines: list[str] = []
        client.wait_ready("asr", timeout_s=10.0, progress=lines.append, poll_s=0.05)
        assert lines[0].startswith("asr: Ready=Unknown") and lines[-1] == "asr: Ready=True"
    finally:
        fake.ready_after_s = 0.0


def test_the_adapter_runs_its_whole_cycle_under_the_role_it_is_given(
    fake: FakeKubernetes,
) -> None:
    from knative.cluster.manifests import rbac_objects

    admin = KnativeClient(fake.api_client(), NS)
    admin.apply(service("asr"))  # deploy, as a user with rights on Services
    (role,) = [o for o in rbac_objects(NS) if o["kind"] == "Role"]
    fake.enforce(role)
    try:
        adapter = KnativeClient(fake.api_client(), NS, serving_version="1.23")
        assert adapter.url("asr")
        adapter.ready_replicas("asr")
        adapter.set_scale("asr", 3, owner="a", lease_s=30.0)
        adapter.set_scale("asr", None, owner="a")
        assert fake.denied == []
        with pytest.raises(AccessDeniedError):
            adapter.delete("asr")  # the Role grants no delete: a user's job
        # without a stated version the adapter would read a cluster-scoped namespace: refused
        unstated = KnativeClient(fake.api_client(), NS)
        with pytest.raises(HookUnavailableError, match=r"adapter\.serving_version"):
            unstated.set_scale("asr", 2, owner="b", lease_s=30.0)
    finally:
        fake.enforce(None)
        fake.denied.clear()
    admin.delete("asr")
    assert fake.names("services", NS) == []


def test_cli_errors_are_one_line_with_what_to_do(
    fake: FakeKubernetes,
    client: KnativeClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("functions: {asr: {model: asr, slo_ms: 500}}\n")
    # no kubeconfig anywhere
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cluster.run_deploy(_args(str(config))) == 2
    err = capsys.readouterr().err
    assert err.startswith("slackwise deploy: no usable kubeconfig") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    # a user without rights on Services
    fake.forbid("services")
    assert cluster.run_deploy(_args(str(config)), client) == 2
    err = capsys.readouterr().err
    assert "slackwise deploy:" in err and "403" in err and "needs get, create, patch" in err
    # a bad config names the key
    config.write_text("functions: {asr: {model: asr, slo_ms: -1}}\n")
    assert cluster.run_status(_args(str(config)), client) == 2
    assert "functions.asr.slo_ms" in capsys.readouterr().err


def test_cli_dry_run_stores_nothing(
    fake: FakeKubernetes,
    client: KnativeClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cluster, "_services", lambda args, namespace: [service("asr")])
    args = _args()
    args.dry_run = True
    assert cluster.run_deploy(args, client) == 0
    assert "asr: would change (dry run: accepted)" in capsys.readouterr().out
    assert fake.names("services", NS) == []


def test_a_function_served_by_a_kserve_predictor_is_found_by_its_service(
    client: KnativeClient,
) -> None:
    client.apply(service("embed-predictor"))  # KServe's InferenceService "embed"
    view = KnativeView(client, {"embed": "embed-predictor"})
    view.refresh()
    assert view.url("embed") == "http://embed-predictor.ml.svc.cluster.local"
    assert view.replicas("embed").ready == 1


def test_cli_delete_dry_run_deletes_nothing(
    fake: FakeKubernetes,
    client: KnativeClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cluster, "_services", lambda args, namespace: [service("asr")])
    client.apply(service("asr"))
    before = fake.get("services", NS, "asr")
    args = _args()
    args.dry_run = True
    assert cluster.run_delete(args, client) == 0
    assert "asr: would be deleted (dry run: nothing deleted)" in capsys.readouterr().out
    assert fake.names("services", NS) == ["asr"]
    assert fake.get("services", NS, "asr") == before
    assert ("DELETE", f"/apis/serving.knative.dev/v1/namespaces/{NS}/services/asr") in (
        fake.requests
    )
    args.dry_run = False
    assert cluster.run_delete(args, client) == 0
    assert fake.names("services", NS) == []


def test_the_namespace_is_the_kubeconfig_contexts_unless_given(tmp_path: Path) -> None:
    from knative.cluster.connection import context_namespace

    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts:\n"
        "- {name: dev, context: {cluster: c, user: u, namespace: ml-dev}}\n"
        "- {name: bare, context: {cluster: c, user: u}}\n"
    )
    assert context_namespace(str(kubeconfig)) == "ml-dev"
    assert context_namespace(str(kubeconfig), "bare") == "default"
    args = _args()
    args.namespace, args.kubeconfig, args.context = None, str(kubeconfig), None
    assert cluster._connect(args).namespace == "ml-dev"
    assert args.namespace == "ml-dev"
    args.namespace = "given"
    assert cluster._connect(args).namespace == "given"
    args.namespace, args.context = None, "nope"
    with pytest.raises(cluster._Refused, match="nope"):
        cluster._connect(args)
