"""The frontier held to one setting for every trace: merged grids, the per-trace cheapest point,
and which settings comply everywhere."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def one_setting(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("frontier_one_setting")


def _run(hold: float, u: float, replica_s: float, compliance: float) -> dict[str, Any]:
    return {"hold_s": hold, "burst_u": u, "replica_seconds": replica_s,
            "compliance_pct": compliance}  # fmt: skip


def _doc(path: Path, traces: dict[str, list[dict[str, Any]]], ours: dict[str, Any]) -> Path:
    rows = {n: {"runs": runs, "slackwise": ours[n]} for n, runs in traces.items()}
    doc = {"commit": "abc1234", "traces": rows}
    path.write_text(json.dumps(doc))
    return path


def test_a_setting_compliant_everywhere_and_the_cheapest_per_trace_from_merged_grids(
    one_setting: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = {"a": _run(0, 0, 110.0, 99.5), "b": _run(0, 0, 90.0, 99.9)}
    coarse = _doc(tmp_path / "coarse.json", {
        "a": [_run(30, 1.0, 100.0, 99.2), _run(300, 1.3, 150.0, 99.9)],
        "b": [_run(30, 1.0, 50.0, 90.0), _run(300, 1.3, 100.0, 100.0)],
    }, ours)  # fmt: skip
    # a finer grid for b only: one more setting of b, complying at 80 (b's cheapest now)
    fine = _doc(tmp_path / "fine.json", {"b": [_run(300, 1.2, 80.0, 99.4)]}, ours)
    assert one_setting.main([str(coarse), str(fine)]) == 0
    text = capsys.readouterr().out
    lines = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    # a's cheapest is 100 (30 s, U 1), b's 80: 300 s at U 1.3 is 1.50 and 1.25 of them
    assert "1.50 × at 99.9 %" in lines["| 300 s, 1.3"] and lines["| 300 s, 1.3"].endswith("yes |")
    assert "1.25 × at 100.0 %" in lines["| 300 s, 1.3"]
    assert "(under 99)" in lines["| 30 s, 1"] and lines["| 30 s, 1"].endswith("no |")
    assert "| 300 s, 1.2" not in lines  # a setting run on one trace only is not a uniform one
    assert "1.10 × at 99.5 %" in lines["| **slackwise** (the configs' one setting)"]
    assert "Settings compliant on every trace: 300 s at U 1.3" in text
    assert "slackwise costs no more than 1 of 1 on every trace" in text


def test_an_unreadable_file_is_named(
    one_setting: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert one_setting.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "bad.json" in err
