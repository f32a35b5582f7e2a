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
model = latency_prior("embed")
print(round(model.estimate_ms(1), 3), round(latency_prior("no-such-kind").estimate_ms(1), 3))
"""


@pytest.mark.slow
def test_an_installed_package_finds_its_profiles_and_samples(tmp_path: Path) -> None:
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
