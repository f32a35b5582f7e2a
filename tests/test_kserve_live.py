"""A V2 infer through the adapter against a real KServe ModelServer: KServe is installed into a
throwaway venv for the test (skipped, with the reason, where it cannot be installed), serves a
model slackwise has no kind for, and the adapter fronts it for V1 and V2 clients alike,
batching them together."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from adapter.serving.app import create_app
from functions.server_process import free_port
from slackwise_config import parse_config

KSERVE = "kserve==0.21.0"
SERVER = Path(__file__).with_name("kserve_v2_server.py")


@pytest.fixture(scope="module")
def kserve_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a throwaway venv with KServe in it."""
    where = tmp_path_factory.mktemp("kserve-venv")
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    try:
        subprocess.run([str(python), "-m", "pip", "install", "-q", KSERVE], check=True,
                       capture_output=True, timeout=600)  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"{KSERVE} could not be installed here: {exc}")
    return python


@pytest.fixture(scope="module")
def kserve_url(kserve_python: Path) -> Iterator[str]:
    python, where = kserve_python, kserve_python.parent.parent
    port = free_port()
    log = (where / "server.log").open("wb")
    server = subprocess.Popen([str(python), str(SERVER), str(port)], stdout=log,
                              stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/v2/models/adder/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, (where / "server.log").read_text()
            assert time.monotonic() < deadline, "KServe did not become ready in 60 s"
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(20)
        log.close()


@pytest.mark.slow
def test_the_adapter_fronts_a_kserve_model_for_v1_and_v2_clients(kserve_url: str) -> None:
    cfg = parse_config({"functions": {"adder": {"slo_ms": 2000, "max_batch": 16, "upstream": {
        "protocol": "v2", "url": kserve_url, "model": "adder"}}}})  # fmt: skip
    with TestClient(create_app(cfg)) as c:
        r = c.post("/v1/models/adder:predict", json={"instances": [[1, 2], [3, 4]]})
        assert r.status_code == 200 and r.json() == {"predictions": [3.0, 7.0]}, r.text
        body = {"id": "q1", "inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32",
                                        "data": [5, 6]}]}  # fmt: skip
        r = c.post("/v2/models/adder/infer", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["id"] == "q1" and r.json()["outputs"][0]["data"] == [11.0]

        def one(i: int) -> httpx.Response:
            if i % 2:
                return c.post("/v1/models/adder:predict", json={"instances": [[i, 1]]})
            return c.post("/v2/models/adder/infer", json={"inputs": [
                {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [i, 1]}]})  # fmt: skip

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(one, range(48)))
        sizes = [int(a.headers["x-batch-size"]) for a in answers]
    for i, a in enumerate(answers):
        assert a.status_code == 200, a.text
        got = a.json()["predictions"] if i % 2 else a.json()["outputs"][0]["data"]
        assert got == [float(i + 1)]
    assert max(sizes) > 1  # V1 and V2 clients shared KServe's batches
    assert sys.executable  # the adapter ran here; KServe in its own venv


CLIENT_CALLS = Path(__file__).with_name("kserve_client_calls.py")


@pytest.mark.slow
def test_kserves_own_client_through_the_adapter_binary_both_ways(
    kserve_python: Path, kserve_url: str, tmp_path: Path
) -> None:
    """KServe's REST client, binary and JSON, against ``slackwise serve`` fronting the KServe
    server with ``binary_data: true`` (the adapter's batches to KServe are binary too)."""
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"functions": {"adder": {"slo_ms": 2000, "max_batch": 16,
        "upstream": {"protocol": "v2", "url": kserve_url, "model": "adder",
                     "binary_data": True}}}}))  # fmt: skip
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "slackwise_cli.main", "serve", "-c",
                               str(config), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        done = subprocess.run([str(kserve_python), str(CLIENT_CALLS), url], capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout)
        v1 = httpx.post(f"{url}/v1/models/adder:predict", json={"instances": [[1, 2]]}).json()
    finally:
        server.terminate()
        server.wait(20)
    for form, framed in (("binary", True), ("json", False)):
        assert seen[form]["sum"] == [3.0, 7.5] and seen[form]["datatype"] == "FP32", seen
        assert seen[form]["id"] == f"k-{framed}" and seen[form]["framed"] is framed
    assert v1 == {"predictions": [3.0]}  # V1 clients of the same V2 upstream
