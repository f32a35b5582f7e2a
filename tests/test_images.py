"""Every image starts: its file set, installed as its Dockerfile installs it, runs its entry point.

No Docker here, so each image is rebuilt as a directory: the files its Dockerfile copies (the base
image's too), installed with pip from that copy alone (``pip install --no-deps --target``), and
only the distributions its Dockerfile installs (the core dependencies, the extras it names, the
packages of its ``pip install`` lines, and everything those require) are importable: the entry
point runs in ``python -S`` (no site hooks, so not the editable install of this checkout) with an
import hook that refuses a module of any other installed distribution. A module the image does
not copy, or a package it does not install, then fails here as it would crash-loop in a cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BASE = "slackwise-functions-base"
FUNCTIONS = sorted(p.parent.name for p in (ROOT / "functions").glob("*/Dockerfile"))


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _final_stage(path: Path) -> list[tuple[str, str]]:
    """The last stage's instructions, its ``FROM`` with the ``ARG`` defaults before it filled in
    (``ARG BASE_IMAGE=...`` then ``FROM ${BASE_IMAGE}``: a registry of one's own at build time)."""
    steps = _instructions(path)
    last = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    defaults = dict(
        rest.split("=", 1) for word, rest in steps[:last] if word == "ARG" and "=" in rest
    )
    base = re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), steps[last][1])
    return [("FROM", base), *steps[last + 1 :]]


def test_every_dockerfile_takes_its_base_image_as_a_build_argument() -> None:
    for path in [ROOT / "adapter" / "Dockerfile", *ROOT.glob("functions/**/Dockerfile*")]:
        steps = _instructions(path)
        froms = [rest for word, rest in steps if word == "FROM"]
        assert froms and all(f.startswith("${BASE_IMAGE}") for f in froms), path
        assert any(w == "ARG" and r.startswith("BASE_IMAGE=") for w, r in steps), path
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".git", ".venv", "runs", "tests"} <= set(ignored)


def _project() -> dict[str, Any]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project: dict[str, Any] = doc["project"]
    return project


def _image(dockerfile: Path) -> tuple[list[str], list[str]]:
    """(paths the image copies from the build context, requirements it installs)."""
    steps = _final_stage(dockerfile)
    copies: list[str] = []
    requirements: list[str] = []
    if steps[0][1].split()[0] == BASE:
        copies, requirements = _image(ROOT / "functions" / "Dockerfile.base")
    project = _project()
    optional: dict[str, list[str]] = project["optional-dependencies"]
    for word, rest in steps:
        if word == "COPY" and "--from=" not in rest:
            args = [a for a in rest.split() if not a.startswith("--")]
            copies += [a.rstrip("*") for a in args[:-1]]
        elif word == "RUN":
            for command in rest.split("&&"):
                if "tomllib" in command and "requirements.txt" in command:
                    extras = command.split('"')[-1].split(">")[0].split()
                    requirements += list(project["dependencies"])
                    requirements += [r for e in extras for r in optional[e]]
                elif "pip install" in command:
                    requirements += re.findall(r'"([^"]+)"', command)
    return copies, requirements


@cache
def _distributions() -> dict[str, metadata.Distribution]:
    return {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions these requirements pull in (markers evaluated here)."""
    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    seen: set[str] = set()
    extras_seen: set[tuple[str, str]] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        dist = _distributions().get(name)
        if dist is None or name == "slackwise":
            continue
        new_extras = {(name, e) for e in req.extras} - extras_seen
        if name in seen and not new_extras:
            continue
        seen.add(name)
        extras_seen |= new_extras
        for line in dist.requires or []:
            sub = Requirement(line)
            todo += [(sub, e) for e in ["", *req.extras]]
    return seen


def _blocked(allowed: set[str]) -> list[str]:
    """Top-level modules of installed distributions the image does not install."""
    out = set()
    for module, dists in metadata.packages_distributions().items():
        names = {canonicalize_name(d) for d in dists}
        if not names & allowed and "slackwise" not in names:
            out.add(module)
    return sorted(out)


_BOOT = """
import importlib.machinery as machinery
import os, runpy, sys
site, packages, blocked, module = sys.argv[1:5]
# not the checkout: only the image's files and the interpreter's installed packages
sys.path[:] = [site] + [p for p in sys.path if p not in ("", os.getcwd())] + [packages]
blocked = frozenset(blocked.split(","))

class Installed:
    # the path finder, blind to the distributions the image does not install (a probe with
    # importlib.util.find_spec sees them as absent, as it would in the image)
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            return None
        return machinery.PathFinder.find_spec(name, path, target)

    @staticmethod
    def invalidate_caches():
        machinery.PathFinder.invalidate_caches()

    @staticmethod
    def find_distributions(*args, **kwargs):
        return machinery.PathFinder.find_distributions(*args, **kwargs)

sys.meta_path[:] = [Installed if f is machinery.PathFinder else f for f in sys.meta_path]
sys.argv = [module, *sys.argv[5:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@cache
def _built(dockerfile: Path, tmp: Path) -> tuple[Path, str]:
    """The image's installed file set and the modules it cannot import."""
    copies, requirements = _image(dockerfile)
    context = tmp / "context"
    for item in copies:
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, context / item, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            (context / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, context / item)
    site = tmp / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(context)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return site, ",".join(_blocked(_closure(requirements)))


def _command(site: Path, blocked: str, module: str, *args: str) -> list[str]:
    packages = sysconfig.get_paths()["purelib"]
    return [sys.executable, "-S", "-c", _BOOT, str(site), packages, blocked, module, *args]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve_until(cmd: list[str], url: str, cwd: Path, timeout_s: float = 180.0) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    log = cwd / "serve.log"
    with (
        log.open("w") as out,
        subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT) as proc,
    ):
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    pytest.fail(f"exited with {proc.returncode}: {log.read_text()[-3000:]}")
                try:
                    if httpx.get(url, timeout=2.0).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.3)
            pytest.fail(f"{url} not ready within {timeout_s} s: {log.read_text()[-3000:]}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_parser_reads_what_the_dockerfiles_install() -> None:
    import tomllib

    copies, requirements = _image(ROOT / "adapter" / "Dockerfile")
    with (ROOT / "pyproject.toml").open("rb") as f:
        found = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    # every package the project installs is in the adapter's image (a new one was once left out)
    assert {pattern.rstrip("*") for pattern in found} <= set(copies)
    assert any(r.startswith("kubernetes") for r in requirements)
    assert not any(r.startswith(("torch", "locust", "matplotlib")) for r in requirements)
    copies, requirements = _image(ROOT / "functions" / "digits" / "Dockerfile")
    assert copies[-1] == "functions" and any(r.startswith("scikit-learn") for r in requirements)
    assert not any(r.startswith(("kubernetes", "locust", "matplotlib")) for r in requirements)


def test_a_module_the_image_lacks_fails_to_import(tmp_path: Path) -> None:
    site, blocked = _built(ROOT / "functions" / "Dockerfile.base", tmp_path)
    assert "kubernetes" in blocked.split(",") and "sklearn" in blocked.split(",")
    done = subprocess.run(_command(site, blocked, "knative.cluster.client"),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "No module named 'knative'" in done.stderr  # the base image does not copy it
    probe = subprocess.run(_command(site, blocked, "sklearn"), capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert "No module named sklearn" in probe.stderr  # installed here, not in the image


def test_the_adapter_image_starts(tmp_path: Path) -> None:
    site, blocked = _built(ROOT / "adapter" / "Dockerfile", tmp_path)
    help_run = subprocess.run(_command(site, blocked, "slackwise_cli.main", "--help"),
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert help_run.returncode == 0, help_run.stderr[-3000:]
    assert "serve" in help_run.stdout
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"functions": {"digits": {"model": "digits", "slo_ms": 200}}}))
    port = _free_port()
    # the embedded local platform: the adapter starts for real (its functions are processes of
    # the test's interpreter, not of the image)
    cmd = _command(site, blocked, "slackwise_cli.main", "serve", "-c", str(config), "--host",
                   "127.0.0.1", "--port", str(port))  # fmt: skip
    _serve_until(cmd, f"http://127.0.0.1:{port}/healthz", tmp_path)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_function_image_starts(function: str, tmp_path: Path) -> None:
    site, blocked = _built(ROOT / "functions" / function / "Dockerfile", tmp_path)
    help_run = subprocess.run(_command(site, blocked, "functions.serve", "--help"),
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert help_run.returncode == 0, help_run.stderr[-3000:]
    port = _free_port()
    cmd = _command(site, blocked, "functions.serve", "--model", function, "--port", str(port))
    _serve_until(cmd, f"http://127.0.0.1:{port}/v1/models/{function}", tmp_path)
