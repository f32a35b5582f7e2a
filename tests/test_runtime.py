"""The V1 runtime driven in process: request checks, errors, readiness and headers."""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from functions.digits.model import DigitsClassifier
from functions.headers import BATCH_SIZE, COLD_START, COMPUTE_MS, MODEL_LOAD_MS, PROCESS_START
from functions.model import InvalidInput, Model
from functions.runtime import create_app

#: how long a model may take to load before a test gives up on it: a bound for a hang, not a
#: speed claim (training digits on two cores that other processes keep busy took over 30 s)
READY_TIMEOUT_S = 120.0


class _Echo(Model):
    """Answers each number doubled; ``"boom"`` makes the batch fail; load waits on an event."""

    kind = "echo"
    max_instances = 4

    def __init__(self, *, threads: int = 1, release: threading.Event | None = None) -> None:
        super().__init__(threads=threads)
        self.release = release
        self.loading = threading.Event()

    def load(self) -> None:
        self.loading.set()
        if self.release is not None and not self.release.wait(READY_TIMEOUT_S):
            raise TimeoutError("load was never released")

    def validate(self, instance: Any) -> Any:
        if instance == "boom":
            return instance
        if isinstance(instance, bool) or not isinstance(instance, int):
            raise InvalidInput("expected an integer")
        return instance

    def predict(self, batch: list[Any]) -> list[Any]:
        if "boom" in batch:
            raise RuntimeError("exploded on purpose")
        return [2 * x for x in batch]

    def sample_instances(self, n: int) -> list[Any]:
        return list(range(n))


class _BrokenLoad(_Echo):
    def load(self) -> None:
        raise FileNotFoundError("weights.bin is missing")


def _wait_ready(client: TestClient, name: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if client.get(f"/v1/models/{name}").status_code == 200:
            return
        time.sleep(0.005)
    raise AssertionError(f"{name} not ready after {READY_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def digits() -> Iterator[TestClient]:
    with TestClient(create_app(DigitsClassifier())) as client:
        _wait_ready(client, "digits")
        yield client


@pytest.fixture
def echo() -> Iterator[TestClient]:
    with TestClient(create_app(_Echo())) as client:
        _wait_ready(client, "echo")
        yield client


def _pixels(value: float = 3.0) -> list[float]:
    return [value] * 64


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"", "empty body"),
        (b'{"inputs": []}', "'instances' list"),
        (b"[1, 2]", "'instances' list"),
        (b'{"instances": {"a": 1}}', "must be a list"),
        (b'{"instances": []}', "is empty"),
        (b'{"instances": [[1, 2, 3]]}', "instances[0]: expected 64 pixel values"),
        (b'{"instances": ["sixty four"]}', "instances[0]: expected 64"),
        (b'{"instances": [[' + b",".join([b'"a"'] * 64) + b"]]}", "must be numbers"),
        (b'{"instances": [[' + b",".join([b"99"] * 64) + b"]]}", "within [0, 16]"),
    ],
)
def test_bad_requests_are_400_with_a_reason(digits: TestClient, body: bytes, reason: str) -> None:
    response = digits.post("/v1/models/digits:predict", content=body)
    assert response.status_code == 400
    assert reason in response.json()["error"]


def test_too_many_instances_is_400(digits: TestClient) -> None:
    count = DigitsClassifier.max_instances + 1
    response = digits.post("/v1/models/digits:predict", json={"instances": [_pixels()] * count})
    assert response.status_code == 400
    assert f"{count} instances exceed" in response.json()["error"]


def test_predicts_flat_and_square_instances(digits: TestClient) -> None:
    square = [[3.0] * 8 for _ in range(8)]
    response = digits.post("/v1/models/digits:predict", json={"instances": [_pixels(), square]})
    assert response.status_code == 200
    first, second = response.json()["predictions"]
    assert first == second
    assert 0 <= first["label"] <= 9
    assert 0.0 < first["probability"] <= 1.0


def test_wrong_model_name_is_404(digits: TestClient) -> None:
    assert digits.get("/v1/models/mnist").status_code == 404
    response = digits.post("/v1/models/mnist:predict", json={"instances": [_pixels()]})
    assert response.status_code == 404
    assert "'digits'" in response.json()["error"]


def test_headers_and_cold_flag() -> None:
    with TestClient(create_app(DigitsClassifier())) as client:
        _wait_ready(client, "digits")
        body = {"instances": [_pixels(), _pixels(5.0), _pixels(7.0)]}
        first = client.post("/v1/models/digits:predict", json=body)
        second = client.post("/v1/models/digits:predict", json=body)
    assert first.status_code == second.status_code == 200
    assert first.headers[COLD_START] == "1"
    assert second.headers[COLD_START] == "0"
    for response in (first, second):
        assert float(response.headers[COMPUTE_MS]) >= 0.0
        assert float(response.headers[MODEL_LOAD_MS]) > 0.0
        assert response.headers[BATCH_SIZE] == "3"
    assert first.headers[PROCESS_START] == second.headers[PROCESS_START]
    assert abs(float(first.headers[PROCESS_START]) - time.time()) < 600


def test_model_error_is_500_and_the_next_request_succeeds(echo: TestClient) -> None:
    failed = echo.post("/v1/models/echo:predict", json={"instances": [1, "boom"]})
    assert failed.status_code == 500
    assert "exploded on purpose" in failed.json()["error"]
    ok = echo.post("/v1/models/echo:predict", json={"instances": [1, 2]})
    assert ok.status_code == 200
    assert ok.json() == {"predictions": [2, 4]}


def test_validate_errors_name_the_instance(echo: TestClient) -> None:
    response = echo.post("/v1/models/echo:predict", json={"instances": [1, 2.5]})
    assert response.status_code == 400
    assert response.json()["error"] == "instances[1]: expected an integer"


def test_not_ready_while_loading() -> None:
    release = threading.Event()
    model = _Echo(release=release)
    with TestClient(create_app(model)) as client:
        assert model.loading.wait(READY_TIMEOUT_S)
        ready = client.get("/v1/models/echo")
        assert ready.status_code == 503
        assert ready.json() == {"name": "echo", "ready": False}
        predict = client.post("/v1/models/echo:predict", json={"instances": [1]})
        assert predict.status_code == 503
        assert "loading" in predict.json()["error"]
        release.set()
        _wait_ready(client, "echo")
        assert client.post("/v1/models/echo:predict", json={"instances": [1]}).status_code == 200


def test_failed_load_is_reported() -> None:
    with TestClient(create_app(_BrokenLoad())) as client:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while (response := client.get("/v1/models/echo")).json().get("ready") is False:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert response.status_code == 503
        assert "weights.bin is missing" in response.json()["error"]
        predict = client.post("/v1/models/echo:predict", json={"instances": [1]})
        assert predict.status_code == 503
        assert "weights.bin is missing" in predict.json()["error"]


def test_custom_name_in_path() -> None:
    with TestClient(create_app(_Echo(), name="doubler")) as client:
        _wait_ready(client, "doubler")
        response = client.post("/v1/models/doubler:predict", json={"instances": [3]})
        assert response.json() == {"predictions": [6]}
        assert client.get("/v1/models/echo").status_code == 404


def test_digits_heldout_accuracy() -> None:
    model = DigitsClassifier()
    model.load()
    assert model.heldout_accuracy > 0.9
    samples = model.sample_instances(5)
    assert len(samples) == 5
    assert len(model.predict([model.validate(s) for s in samples])) == 5


class _Threads(_Echo):
    """Records which thread ran each batch; ``delay_s`` makes every batch that slow."""

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.threads: list[str] = []

    def predict(self, batch: list[Any]) -> list[Any]:
        self.threads.append(threading.current_thread().name)
        if self.delay_s:
            time.sleep(self.delay_s)
        return super().predict(batch)


def test_a_fast_model_runs_on_the_event_loop_after_its_first_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the echo model takes microseconds; a threshold far above that keeps a loaded machine
    # (a preempted first batch) from making it look slow
    monkeypatch.setattr("functions.runtime.INLINE_BELOW_MS", 50.0)
    model = _Threads()
    with TestClient(create_app(model)) as client:
        _wait_ready(client, "echo")
        for _ in range(3):
            assert (
                client.post("/v1/models/echo:predict", json={"instances": [1]}).status_code == 200
            )
    first, *rest = model.threads
    assert first.startswith("predict")  # unknown speed: the worker thread
    assert rest and not any(name.startswith("predict") for name in rest)


def test_a_slow_model_stays_on_the_worker_thread() -> None:
    model = _Threads(delay_s=0.005)  # 5 ms a batch, above the inline threshold
    with TestClient(create_app(model)) as client:
        _wait_ready(client, "echo")
        for _ in range(3):
            assert (
                client.post("/v1/models/echo:predict", json={"instances": [1]}).status_code == 200
            )
    assert len(model.threads) == 3 and all(n.startswith("predict") for n in model.threads)


def test_digits_forward_pass_matches_scikit_learn() -> None:
    from sklearn.datasets import load_digits

    model = DigitsClassifier()
    model.load()
    pixels = load_digits().data[:200]
    ours = model.probabilities(pixels)
    theirs = model._clf.predict_proba(pixels)
    assert ours.shape == theirs.shape
    assert abs(ours - theirs).max() < 1e-9
    assert (ours.argmax(axis=1) == theirs.argmax(axis=1)).all()


def test_functions_speak_the_open_inference_protocol_too(digits: TestClient) -> None:
    images = DigitsClassifier().sample_instances(3)
    flat = [float(x) for row in images for x in row]
    body = {"inputs": [{"name": "input-0", "shape": [3, len(images[0])], "datatype": "FP32",
                        "data": flat}]}  # fmt: skip
    v2 = digits.post("/v2/models/digits/infer", json=body)
    assert v2.status_code == 200, v2.text
    label, probability = v2.json()["outputs"]  # the declared outputs, a tensor per field
    assert (label["name"], label["datatype"], label["shape"]) == ("label", "INT64", [3])
    assert (probability["datatype"], probability["shape"]) == ("FP32", [3])
    v1 = digits.post("/v1/models/digits:predict", json={"instances": images}).json()
    assert [{"label": a, "probability": b} for a, b in
            zip(label["data"], probability["data"], strict=True)] == v1["predictions"]  # fmt: skip
    # binary both ways, as Triton's client sends by default
    head = json.dumps({"inputs": [{"name": "input-0", "shape": [3, 64], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 3 * 64 * 4}}],
                       "parameters": {"binary_data_output": True}}).encode()  # fmt: skip
    raw = struct.pack("<192f", *flat)
    framed = digits.post("/v2/models/digits/infer", content=head + raw,
                         headers={"Inference-Header-Content-Length": str(len(head))})  # fmt: skip
    size = int(framed.headers["inference-header-content-length"])
    assert struct.unpack("<3q", framed.content[size : size + 24]) == tuple(label["data"])
    assert digits.get("/v2/health/live").status_code == 200
    assert digits.get("/v2/health/ready").json() == {"ready": True}
    assert digits.get("/v2/models/digits/ready").status_code == 200
    assert digits.get("/v1/models").json() == {"models": ["digits"]}
    bad = digits.post("/v2/models/digits/infer", json={"inputs": [
        {"shape": [2, 3], "datatype": "FP32", "data": [1]}]})  # fmt: skip
    assert bad.status_code == 400 and "2 values" not in bad.json()["error"]
    assert "1 values for shape [2, 3]" in bad.json()["error"]


class _Tripler(_Echo):
    kind = "tripler"

    def predict(self, batch: list[Any]) -> list[Any]:
        return [3 * x for x in batch]


def test_one_process_serves_several_models_under_their_kinds() -> None:
    """ROMA's GPU executable: two models in one app, each at its own path, one worker thread."""
    with TestClient(create_app([_Echo(), _Tripler()])) as client:
        _wait_ready(client, "echo")
        _wait_ready(client, "tripler")
        assert client.get("/v2/health/ready").status_code == 200
        assert client.get("/v1/models").json() == {"models": ["echo", "tripler"]}
        doubled = client.post("/v1/models/echo:predict", json={"instances": [1, 2]})
        tripled = client.post("/v1/models/tripler:predict", json={"instances": [1, 2]})
        assert doubled.json() == {"predictions": [2, 4]}
        assert tripled.json() == {"predictions": [3, 6]}
        # each model keeps its own cold flag; both ran on the one worker
        assert doubled.headers[COLD_START] == "1" and tripled.headers[COLD_START] == "1"
        missing = client.post("/v1/models/digits:predict", json={"instances": [1]})
        assert missing.status_code == 404
        assert "'echo', 'tripler'" in missing.json()["error"]


def test_server_ready_waits_for_every_model() -> None:
    release = threading.Event()
    with TestClient(create_app([_Tripler(), _Echo(release=release)])) as client:
        _wait_ready(client, "tripler")
        assert client.get("/v2/health/ready").status_code == 503
        assert client.get("/v1/models/echo").status_code == 503
        release.set()
        _wait_ready(client, "echo")
        assert client.get("/v2/health/ready").status_code == 200


def test_several_models_refuse_a_shared_name_or_a_duplicate() -> None:
    with pytest.raises(ValueError, match="single model"):
        create_app([_Echo(), _Tripler()], name="both")
    with pytest.raises(ValueError, match="given twice"):
        create_app([_Echo(), _Echo()])
    with pytest.raises(ValueError, match="at least one"):
        create_app([])


class _Gated(_Echo):
    """Holds each batch until ``gate`` is set, and says when one is held."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.holding = threading.Event()

    def predict(self, batch: list[Any]) -> list[Any]:
        self.holding.set()
        if not self.gate.wait(READY_TIMEOUT_S):
            raise TimeoutError("the gate was never opened")
        return super().predict(batch)


def test_past_max_in_flight_a_predict_is_bounced_at_once_with_429() -> None:
    model = _Gated()
    with TestClient(create_app(model, max_in_flight=1)) as client:
        _wait_ready(client, "echo")
        first: dict[str, Any] = {}

        def send() -> None:
            first["answer"] = client.post("/v1/models/echo:predict", json={"instances": [1]})

        held = threading.Thread(target=send)
        held.start()
        assert model.holding.wait(READY_TIMEOUT_S)
        bounced = client.post("/v1/models/echo:predict", json={"instances": [2]})
        assert bounced.status_code == 429
        assert "busy: 1 predict(s) in flight" in bounced.json()["error"]
        assert bounced.headers["retry-after"] == "0"
        assert client.get("/v1/models/echo").status_code == 200  # status is never bounced
        model.gate.set()
        held.join(READY_TIMEOUT_S)
        assert first["answer"].json() == {"predictions": [2]}
        again = client.post("/v1/models/echo:predict", json={"instances": [3]})
        assert again.status_code == 200 and again.json() == {"predictions": [6]}


@pytest.mark.parametrize("bad", [0, -1, True])
def test_max_in_flight_must_be_a_positive_integer(bad: int) -> None:
    with pytest.raises(ValueError, match="max_in_flight must be an integer >= 1"):
        create_app(_Echo(), max_in_flight=bad)


@pytest.mark.parametrize("value", ["0", "-3"])
def test_serve_refuses_a_max_in_flight_below_one(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions.serve import main

    with pytest.raises(SystemExit) as exit_:
        main(["--model", "digits", "--max-in-flight", value, "--port", "0"])
    assert exit_.value.code == 2
    assert f"--max-in-flight must be at least 1, got {value}" in capsys.readouterr().err


class _Sizes(_Echo):
    """An echo that notes the size of every batch it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def predict(self, batch: list[Any]) -> list[Any]:
        self.sizes.append(len(batch))
        return super().predict(batch)


def test_a_gpu_replica_runs_each_batch_size_once_before_it_says_ready() -> None:
    from functions.runtime import warm_up

    cpu = _Sizes()
    assert warm_up(cpu) == [] and cpu.sizes == []  # the CPU: a cold start no longer for it
    gpu = _Sizes()
    gpu.device = "cuda:0"  # what warm_up reads; the echo itself computes anywhere
    with TestClient(create_app(gpu)) as client:
        _wait_ready(client, "echo")
        assert gpu.sizes == [1, 2, 4]  # powers of two up to max_instances, before ready
        answer = client.post("/v1/models/echo:predict", json={"instances": [1, 2]})
        assert answer.json() == {"predictions": [2, 4]} and gpu.sizes[-1] == 2
