"""The command line as a user runs it: real subprocesses, real signals."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from knative.local.guard import ENV_VAR as TOKEN_ENV
from knative.local.guard import token_file

CONFIG = """
platform:
  autoscaler: {stable-window: 6s}
functions:
  digits:
    model: digits
    annotations:
      autoscaling.knative.dev/min-scale: "1"
"""


def slackwise(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slackwise_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_validate_names_the_file_key_and_value(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace('"1"', '"-1"'))
    result = slackwise("validate", "-c", str(bad))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert str(bad) in result.stderr
    assert "functions.digits.annotations" in result.stderr
    assert "min-scale" in result.stderr and "-1" in result.stderr


def test_validate_accepts_the_shipped_experiment_config() -> None:
    result = slackwise("validate", "-c", "experiments/local.yaml")
    assert result.returncode == 0, result.stderr
    assert "function digits" in result.stdout


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    result = slackwise("validate", "-c", str(tmp_path / "nope.yaml"))
    assert result.returncode != 0
    assert "cannot read" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_up_serves_and_ctrl_c_leaves_no_process_behind(tmp_path: Path) -> None:
    config = tmp_path / "up.yaml"
    config.write_text(CONFIG)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    env.pop(TOKEN_ENV, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "slackwise_cli.main", "up", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", first)
        assert match, first
        base = match.group(0)
        token_path = token_file(int(match.group(1)), {"XDG_RUNTIME_DIR": str(tmp_path)})
        deadline = time.monotonic() + 30
        while not token_path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert token_path.stat().st_mode & 0o777 == 0o600  # readable by its user alone
        auth = {"authorization": f"Bearer {token_path.read_text().strip()}"}
        # no token, or a rebinding page's Host: refused, and nothing starts
        assert httpx.get(f"{base}/platform/functions", timeout=5).status_code == 401
        rebinding = {**auth, "host": "evil.example"}
        rebound = httpx.put(
            f"{base}/platform/functions/digits/min-scale", json={"min_scale": 3}, headers=rebinding
        )
        assert rebound.status_code == 403
        children: list[psutil.Process] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = httpx.get(f"{base}/platform/functions/digits", headers=auth, timeout=5).json()
            if status["replicas"]["ready"] == 1:
                break
            time.sleep(0.2)
        assert status["replicas"]["ready"] == 1
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children
        answer = httpx.post(
            f"{base}/v1/models/digits:predict",
            json={"instances": [[0.0] * 64]},
            headers=auth,
            timeout=30,
        )
        assert answer.status_code == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        _gone, alive = psutil.wait_procs(children, timeout=5)
        assert not alive
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
