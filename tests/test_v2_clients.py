"""The Open Inference Protocol as the standard clients speak it: NVIDIA's ``tritonclient.http``
(installed into a throwaway venv the test makes; skipped, with the reason, where it cannot be)
against ``slackwise serve`` with real functions: digits (numbers), embed (strings) and an app
(ner -> qa). With the client's defaults (binary tensor data both ways), with JSON, with
requested outputs in each form, FP16, BYTES; the metadata says what comes back."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from functions.digits.model import DigitsClassifier
from functions.server_process import free_port

pytestmark = [pytest.mark.slow, pytest.mark.models]

CLIENT = "tritonclient[http]==2.73.0"
CALLS = Path(__file__).with_name("v2_client_calls.py")
FUNCTIONS = {"digits": "digits", "embed": "embed", "nlu": "ner", "answer": "qa"}


def _config() -> dict[str, Any]:
    fn = {"threads": 1, "slo_ms": 5000, "container_concurrency": 1,
          "annotations": {"autoscaling.knative.dev/max-scale": "1"}}  # fmt: skip
    return {
        "platform": {"autoscaler": {"initial-scale": "1"}},
        "functions": {name: {"model": kind, **fn} for name, kind in FUNCTIONS.items()},
        "apps": {"ask": {"stages": ["nlu", "answer"], "slo_ms": 10000}},
    }


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tritonclient-venv")
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    try:
        subprocess.run([str(python), "-m", "pip", "install", "-q", CLIENT], check=True,
                       capture_output=True, timeout=600)  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"{CLIENT} could not be installed here: {exc}")
    return python


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    where = tmp_path_factory.mktemp("v2-serve")
    config = where / "config.yaml"
    config.write_text(json.dumps(_config()))  # JSON is YAML
    port = free_port()
    log = (where / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "slackwise_cli.main", "serve", "-c", str(config), "--port",
         str(port)], stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        waiting = set(FUNCTIONS)
        while waiting:
            assert server.poll() is None, (where / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"no ready replica of {waiting} in 300 s"
            for name in list(waiting):
                try:
                    status = httpx.get(f"http://{url}/v1/models/{name}", timeout=2).json()
                except httpx.HTTPError:
                    continue
                if status.get("replicas", {}).get("ready", 0) >= 1:
                    waiting.discard(name)
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(30)
        log.close()


def test_tritonclient_with_its_defaults_and_every_form(
    client_python: Path, adapter: str, tmp_path: Path
) -> None:
    rows = DigitsClassifier().sample_instances(4)
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    done = subprocess.run([str(client_python), str(CALLS), adapter, str(path)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["live"] and seen["ready"] and seen["models_ready"] == [True, True, True]
    assert "binary_tensor_data" in seen["server"]["extensions"]
    # the labels are the model's: the same as a V1 client gets for the same rows
    v1 = httpx.post(f"http://{adapter}/v1/models/digits:predict", json={"instances": rows},
                    timeout=60).json()["predictions"]  # fmt: skip
    labels = [p["label"] for p in v1]
    assert seen["default"]["label"] == labels and seen["json_label"]["label"] == labels
    assert seen["default"]["probability"] == pytest.approx([p["probability"] for p in v1])
    assert seen["default_id"] == "req-1"
    assert seen["json_names"] == ["label"]  # only what was asked for
    assert seen["mixed"]["label"] == labels and len(seen["mixed"]["probability"]) == 4
    assert seen["fp16"]["label"] == labels  # the rows are small integers: exact in FP16
    assert seen["embed_shape"] == [2, 384]
    assert seen["app"]["answer"] and all(seen["app"]["answer"])
    assert "not one this model takes" in seen["wrong_datatype"]
    # the metadata says what comes back: each output's name, datatype and shape (-1: any)
    answers = {"digits": seen["default_types"], "embed": seen["embed_types"],
               "ask": seen["app"]["types"]}  # fmt: skip
    for model, got in answers.items():
        meta = seen["metadata"][model]
        declared = [[o["name"], o["datatype"], o["shape"]] for o in meta["outputs"]]
        assert [[n, t] for n, t, _ in got] == [[n, t] for n, t, _ in declared], model
        for (_, _, shape), (_, _, want) in zip(got, declared, strict=True):
            assert len(shape) == len(want)
            assert all(w in (-1, int(s)) for s, w in zip(shape, want, strict=True)), model
        assert meta["inputs"][0]["name"] == "input-0"
