"""A plain (non-editable) install carries the data the code reads with importlib.resources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import functions.profiles as p
from functions.profiles import packaged
from adapter.serving.wiring import latency_prior
from functions.ner.model import _SAMPLES
assert p.__file__.startswith({target!r}), p.__file__
assert packaged("embed").is_file() and packaged("qa", "gpu").is_file()
assert _SAMPLES.is_file()
from functions.profiles import memory_mib
assert memory_mib("embed") and memory_mib("digits")  # memory.json is package data too
model = latency_prior("embed")
print(round(model.estimate_ms(1), 3), round(latency_prior("no-such-kind").estimate_ms(1), 3))
"""


def _install(tmp_path: Path) -> Path:
    """The project as a wheel, installed (no dependencies) into a directory of its own."""
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(wheels)],
        check=True,
        capture_output=True,
    )
    wheel = next(wheels.glob("slackwise-*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return target


@pytest.mark.slow
def test_an_installed_package_finds_its_profiles_and_samples(tmp_path: Path) -> None:
    target = _install(tmp_path)
    probe = subprocess.run(
        [sys.executable, "-c", PROBE.format(target=str(target))],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    from_profile, fallback = (float(x) for x in probe.stdout.split())
    assert fallback == 6.0  # 5 ms + 1 ms per instance: no profile for that kind
    assert from_profile != fallback  # the shipped embed profile seeded it


MANIFESTS = """
import sys
import adapter
from slackwise_cli.main import main
assert adapter.__file__.startswith({target!r}), adapter.__file__
sys.exit(main(["manifests", "-c", "config.yaml", "-o", "out", "--namespace", "ml"]))
"""


@pytest.mark.slow
def test_an_installed_package_writes_manifests_anywhere_and_they_pass_the_strict_schema(
    tmp_path: Path,
) -> None:
    """``pip install .`` then ``slackwise manifests`` in an empty directory, nothing of the
    repository or of ``../shared`` in reach: the files it writes pass the Knative 1.23 CRD
    schema strictly (checked here, where the CRD is), and every ``kn`` line it prints follows
    kn's rules."""
    import shlex
    import sysconfig

    import yaml

    from knative.cluster.crd_schema import knative_dir, validate_service
    from knative.cluster.kn_rules import check_kn_line

    crds = knative_dir()
    if not (crds / "service.yaml").is_file():
        pytest.skip(f"the Knative CRDs are not at {crds} (set SLACKWISE_KNATIVE_DIR)")
    target = _install(tmp_path)
    empty = tmp_path / "elsewhere" / "deep"  # no ../shared from here
    empty.mkdir(parents=True)
    config = (ROOT / "experiments" / "embed-twitter.yaml").read_text(encoding="utf-8")
    (empty / "config.yaml").write_text(config, encoding="utf-8")
    # the dependencies from this environment's site-packages, the project only from the wheel
    # (a PYTHONPATH entry runs no .pth file, so the editable checkout stays out of reach)
    deps = sysconfig.get_paths()["purelib"]
    done = subprocess.run(
        [sys.executable, "-c", MANIFESTS.format(target=str(target))],
        cwd=empty,
        env={"PYTHONPATH": f"{target}:{deps}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "checked by Knative's webhook rules only" in done.stdout  # no CRD in reach
    services = []
    for path in sorted((empty / "out").iterdir()):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc["kind"] == "Service" and doc["apiVersion"].startswith("serving"):
                services.append(doc)
    assert [s["metadata"]["name"] for s in services] == ["embed"]
    for manifest in services:
        validate_service(manifest, function=manifest["metadata"]["name"], directory=crds)
    lines = [line for line in done.stdout.splitlines() if line.startswith("kn ")]
    assert len(lines) == len(services)
    for line in lines:
        check_kn_line(line)
        assert shlex.split(line)[3] == "embed"
