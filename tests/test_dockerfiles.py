"""The Dockerfiles start what the local platform starts, as a non-root user, on $PORT."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from functions.registry import KINDS
from tests.test_images import _final_stage, _instructions

ROOT = Path(__file__).resolve().parents[1]
FUNCTION_DOCKERFILES = sorted((ROOT / "functions").glob("*/Dockerfile"))
ROOT_USERS = {"root", "0", "root:root", "0:0"}


def _cmd(path: Path) -> str:
    """The final CMD as one shell string (exec form ``sh -c "..."`` unwrapped)."""
    cmds = [rest for word, rest in _final_stage(path) if word == "CMD"]
    assert cmds, f"{path}: no CMD"
    argv = json.loads(cmds[-1])
    assert argv[:2] == ["sh", "-c"], f"{path}: CMD must be exec-form sh -c to expand $PORT"
    (script,) = argv[2:]
    assert script.startswith("exec "), f"{path}: the server must replace the shell (signals)"
    return str(script)


def _user(path: Path) -> str | None:
    users = [rest for word, rest in _final_stage(path) if word == "USER"]
    return users[-1] if users else None


def _kind(package: str) -> str:
    kinds = [k for k, target in KINDS.items() if target.startswith(f"functions.{package}.")]
    assert len(kinds) == 1, f"functions/{package}: {kinds} registered in functions/registry.py"
    return kinds[0]


def test_every_registered_kind_has_a_dockerfile() -> None:
    packages = {path.parent.name for path in FUNCTION_DOCKERFILES}
    assert {_kind(p) for p in packages} == set(KINDS)


@pytest.mark.parametrize("path", FUNCTION_DOCKERFILES, ids=lambda p: p.parent.name)
def test_function_dockerfile(path: Path) -> None:
    kind = _kind(path.parent.name)
    assert _cmd(path) == (
        f"exec python -m functions.serve --model {kind} --host 0.0.0.0 --port ${{PORT:-8080}}"
    )
    user = _user(path)
    assert user is not None and user not in ROOT_USERS, f"{path}: USER {user}"
    assert _final_stage(path)[0][1].split()[0] == "slackwise-functions-base"


def test_function_base_creates_the_user() -> None:
    base = ROOT / "functions" / "Dockerfile.base"
    runs = " ".join(rest for word, rest in _instructions(base) if word == "RUN")
    assert "useradd --uid 10001" in runs
    assert ("ENV", "PORT=8080") in _instructions(base)


def test_adapter_dockerfile() -> None:
    path = ROOT / "adapter" / "Dockerfile"
    image = _final_stage(path)[0][1]
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", image), f"unpinned base {image}"
    assert _cmd(path) == (
        "exec slackwise serve -c /etc/slackwise/config.yaml --host 0.0.0.0 --port ${PORT:-8080}"
    )
    user = _user(path)
    assert user is not None and user not in ROOT_USERS
    runs = " ".join(rest for word, rest in _instructions(path) if word == "RUN")
    assert "pip install --no-deps ." in runs and "requirements.txt" in runs  # deps first
    assert "[models]" not in runs and "torch" not in runs


GPU_DOCKERFILES = sorted((ROOT / "functions").glob("*/Dockerfile.gpu"))


def test_every_kind_that_computes_on_a_gpu_has_a_gpu_image_and_only_those() -> None:
    from functions.registry import model_class

    gpu_kinds = {k for k in KINDS if "cuda" in model_class(k).devices}
    assert gpu_kinds  # embed, qa, imagenet
    assert {_kind(p.parent.name) for p in GPU_DOCKERFILES} == gpu_kinds


@pytest.mark.parametrize("path", GPU_DOCKERFILES, ids=lambda p: p.parent.name)
def test_gpu_dockerfile_installs_the_cuda_builds(path: Path) -> None:
    kind = _kind(path.parent.name)
    assert _cmd(path) == (
        f"exec python -m functions.serve --model {kind} --device cuda --host 0.0.0.0 "
        "--port ${PORT:-8080}"
    )
    user = _user(path)
    assert user is not None and user not in ROOT_USERS
    served = " ".join(rest for word, rest in _final_stage(path) if word == "RUN")
    assert "whl/cpu" not in served  # the CPU index only in a build stage, never in what serves
    cpu_image = " ".join(
        rest for word, rest in _final_stage(path.with_name("Dockerfile")) if word == "RUN"
    )
    if "torch==" in cpu_image:
        assert re.search(r'pip install "torch==[\d.]+"', served), "PyPI's CUDA build of torch"
    if "onnxruntime" in cpu_image:
        assert "onnxruntime-gpu[cuda,cudnn]" in served and '"onnxruntime>' not in served
