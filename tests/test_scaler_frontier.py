"""The frontier benchmark takes its references from the Fig. 9 results only when they are of the
same code and config."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _frontier() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "scaler_frontier", ROOT / "benchmarks" / "scaler_frontier.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _head() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.stdout.strip()


def _write(directory: Path, commit: str, names: tuple[str, ...]) -> None:
    rows = {n: {"replica_seconds": 100.0 + i, "compliance_pct": 99.5} for i, n in enumerate(names)}
    doc = {"commit": commit, "autoscalers": rows}
    (directory / "autoscale-nasa.json").write_text(json.dumps(doc))


def test_references_of_this_code_are_taken_and_others_refused(tmp_path: Path) -> None:
    frontier = _frontier()
    head = _head()
    _write(tmp_path, head, ("clair_a1", "clair_a2", "kpa", "slackwise"))
    refs = frontier._stored_references(tmp_path, "nasa")
    assert set(refs) == {"clair_a1", "clair_a2", "slackwise"}
    assert refs["clair_a2"]["replica_seconds"] == 101.0
    assert refs["slackwise"]["source"] == f"autoscale-nasa.json at {head}"

    _write(tmp_path, "0000000", ("clair_a1", "clair_a2", "slackwise"))  # not a commit here
    with pytest.raises(SystemExit, match="re-run `slackwise report --run fig9`"):
        frontier._stored_references(tmp_path, "nasa")

    _write(tmp_path, head, ("clair_a1", "clair_a2"))
    with pytest.raises(SystemExit, match="no row for slackwise"):
        frontier._stored_references(tmp_path, "nasa")

    with pytest.raises(SystemExit, match="cannot read"):
        frontier._stored_references(tmp_path, "twitter")
