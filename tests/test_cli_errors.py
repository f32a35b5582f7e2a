"""Every command, given bad input, says what is wrong in a line or two and exits non-zero: no
traceback, whatever the problem (a missing file, a bad value, no cluster, an unwritable path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = "functions: {digits: {model: digits, slo_ms: 100}}\n"
EXPERIMENT = GOOD + (
    "experiment: {function: digits, trace: twitter, start_s: 0, duration_s: 20, max_rps: 5}\n"
)


def slackwise(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slackwise_cli.main", *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.mark.slow
def test_bad_inputs_across_the_command_line_are_one_line_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT)
    short = tmp_path / "short.txt"
    short.write_text("1\n2\n")
    unwritable = tmp_path / "records.yaml"
    unwritable.write_text(GOOD + "adapter: {records: /proc/nope/records.jsonl, port: 0}\n")
    hpa = tmp_path / "hpa.yaml"
    hpa.write_text(EXPERIMENT.replace(
        "slo_ms: 100}", "slo_ms: 100, annotations: {autoscaling.knative.dev/class: "
        "hpa.autoscaling.knative.dev, autoscaling.knative.dev/min-scale: '1'}}"))  # fmt: skip
    no_cluster = {"KUBECONFIG": str(tmp_path / "missing"), "HOME": str(tmp_path)}
    cases = [
        (["validate", "-c", str(tmp_path / "missing.yaml")], "missing.yaml"),
        (["experiment", "-c", str(exp), "--trace", str(short)], "short.txt"),
        (["experiment", "-c", str(exp), "--trace", "nope.txt"], "nope.txt"),
        (["experiment", "-c", str(exp), "--disturbance", "gpu:1:2"], "--disturbance"),
        (["experiment", "-c", str(exp), "--disturbance", "cpu:10:30"], "disturbance ends"),
        (["experiment", "-c", str(exp), "--repeat", "0"], "--repeat"),
        (["manifests", "-c", str(tmp_path / "missing.yaml"), "-o", "-"], "missing.yaml"),
        (["deploy", "-c", str(good)], "no usable kubeconfig"),
        (["delete", "-c", str(good), "--dry-run"], "no usable kubeconfig"),
        (["status", "-c", str(good), "--context", "nope"], "kubeconfig"),
        (["serve", "-c", str(good), "--platform", "knative", "--port", "0"],
         "no usable kubeconfig"),
        (["serve", "-c", str(unwritable)], "cannot write"),
        (["serve", "-c", str(good), "--probe-port", "70000"], "--probe-port must be a TCP port"),
        (["serve", "-c", str(hpa), "--port", "0"], "runs on a cluster only"),
        (["experiment", "-c", str(hpa)], "runs on a cluster only"),
        (["replay", "--trace", "nope.txt", "--target", "http://127.0.0.1:9", "--duration-s",
          "5", "--model", "digits"], "nope.txt"),
    ]  # fmt: skip
    for args, says in cases:
        done = slackwise(*args, env=no_cluster)
        err = done.stderr.strip()
        assert done.returncode != 0, (args, done.stdout, err)
        assert "Traceback" not in err and "Traceback" not in done.stdout, (args, err)
        assert says in err, (args, err)
        assert len(err.splitlines()) <= 3, (args, err)
    assert slackwise("--version").stdout.startswith("slackwise ")


def test_a_plain_install_without_the_cluster_extra_still_works_and_says_what_is_missing(
    tmp_path: Path,
) -> None:
    """``pip install .`` has no Kubernetes client: every command but the cluster's works (the
    manifests are written), and deploy says which extra it needs, in one line."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    code = ("import sys; sys.modules['kubernetes'] = None\n"
            "from slackwise_cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n")  # fmt: skip

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip

    written = run("manifests", "-c", str(config), "-o", str(tmp_path / "out"))
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "out" / "10-function-digits.yaml").is_file()
    assert run("--help").returncode == 0
    for command in ("deploy", "status", "delete"):
        done = run(command, "-c", str(config))
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert "pip install 'slackwise[cluster]'" in done.stderr
