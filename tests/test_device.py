"""A function's device: cuda when asked, or a refusal to start that says why (never the CPU
in silence). Without a GPU (CI) the refusals are what is tested; with one, the models run on it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from functions.device import DeviceUnavailable, parse_device
from functions.registry import create_model
from slackwise_config import ConfigError, parse_config


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.parametrize("text", ["cpu", "cuda", "cuda:0", "cuda:3", " cuda "])
def test_devices_that_parse(text: str) -> None:
    assert parse_device(text) == text.strip()


@pytest.mark.parametrize("text", ["gpu", "cuda:", "cuda:x", "cpu:0", "", "CUDA"])
def test_devices_that_do_not(text: str) -> None:
    with pytest.raises(ValueError, match="cpu, cuda or cuda:N"):
        parse_device(text)


def test_a_cpu_only_model_refuses_a_gpu() -> None:
    with pytest.raises(DeviceUnavailable, match="'digits' computes on cpu only"):
        create_model("digits", device="cuda")
    assert create_model("digits", device="cpu").device == "cpu"


def test_a_gpu_variant_computes_on_cuda_unless_told_otherwise() -> None:
    def fn(**settings: object) -> dict[str, object]:
        return {"functions": {"f": {"model": "embed", **settings}}}

    assert parse_config(fn(variant="gpu")).functions["f"].device == "cuda"
    assert parse_config(fn(variant="gpu", device="cuda:1")).functions["f"].device == "cuda:1"
    assert parse_config(fn()).functions["f"].device == "cpu"
    with pytest.raises(ConfigError, match=r"functions\.f\.device: 'cuda' needs variant: gpu"):
        parse_config(fn(device="cuda"))
    with pytest.raises(ConfigError, match=r"functions\.f\.device: device must be"):
        parse_config(fn(variant="gpu", device="tpu"))


@pytest.mark.slow
@pytest.mark.skipif(_cuda(), reason="a GPU is visible: the refusal cannot happen here")
@pytest.mark.parametrize(
    ("model", "says"),
    [("embed", "torch sees no CUDA GPU"), ("imagenet", "has no CUDA provider")],
)
def test_without_a_gpu_a_function_asked_for_one_refuses_to_start(model: str, says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "functions.serve", "--model", model, "--device", "cuda",
         "--port", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert says in done.stderr and "device: cpu" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.gpu
@pytest.mark.models
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU")
def test_with_a_gpu_embed_computes_on_it() -> None:
    model = create_model("embed", device="cuda")
    model.check_device()
    model.load()
    rows = model.predict([model.validate(x) for x in model.sample_instances(4)])
    assert len(rows) == 4
    encoder = model._encoder._model  # type: ignore[attr-defined]
    assert str(encoder.device).startswith("cuda")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "embed", "--model", "digits", "--name", "x"], "--name applies to a single"),
        (["--model", "digits", "--model", "digits"], "given twice"),
        (["--model", "digits", "--model", "nope"], "unknown model kind 'nope'"),
    ],
)
def test_serving_several_models_rejects_bad_arguments(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions.serve import main

    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--port", "0"])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_a_gpu_executable_refuses_when_one_of_its_models_cannot_use_the_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """digits is scikit-learn: one executable holding it and asked for cuda does not start."""
    from functions.serve import main

    assert main(["--model", "digits", "--model", "embed", "--device", "cuda", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "digits" in err and "cannot be used" in err and "Traceback" not in err


def _onnx_cuda() -> bool:
    try:
        import onnxruntime
    except ImportError:
        return False
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


@pytest.mark.gpu
@pytest.mark.models
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU")
def test_with_a_gpu_qa_ranks_on_it_as_it_does_on_the_cpu() -> None:
    models = {}
    for device in ("cpu", "cuda"):
        model = create_model("qa", device=device)
        model.check_device()
        model.load()
        models[device] = model
    queries = [models["cpu"].validate(x) for x in models["cpu"].sample_instances(8)]
    cpu, gpu = (models[d].predict(queries) for d in ("cpu", "cuda"))
    assert [r["index"] for r in gpu] == [r["index"] for r in cpu]
    assert all(abs(g["score"] - c["score"]) < 1e-3 for g, c in zip(gpu, cpu, strict=True))
    encoder = models["cuda"]._encoder._model  # type: ignore[attr-defined]
    assert str(encoder.device).startswith("cuda")


@pytest.mark.gpu
@pytest.mark.models
@pytest.mark.slow
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU")
def test_with_a_gpu_a_served_function_answers_from_it() -> None:
    import httpx

    from functions.server_process import ServerProcess

    model = create_model("embed")
    body = {"instances": model.sample_instances(16)}
    with ServerProcess("embed", device="cuda") as server, httpx.Client(trust_env=False) as client:
        server.wait_ready(client, timeout_s=180)
        response = client.post(server.predict_url, json=body, timeout=30)
    assert response.status_code == 200, response.text
    rows = response.json()["predictions"]
    assert len(rows) == 16 and all(len(row) == 384 for row in rows)


@pytest.mark.gpu
@pytest.mark.models
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU")
@pytest.mark.skipif(_onnx_cuda(), reason="onnxruntime here has its CUDA provider")
def test_with_a_gpu_but_a_cpu_build_of_onnxruntime_imagenet_refuses_cuda() -> None:
    model = create_model("imagenet", device="cuda")
    with pytest.raises(DeviceUnavailable, match="has no CUDA provider"):
        model.check_device()
