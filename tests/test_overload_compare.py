"""Two revisions' overload runs side by side (benchmarks/overload_compare.py): each side's cells
pooled, shares of each run's own capacity, the docs block rewritten in place."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def compare(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("overload_compare")


def _result(path: Path, commit: str, capacity: float, goodputs: list[float]) -> Path:
    """An overload result of one workload, keep-alive, one cell at 2x per goodput given."""
    runs: list[dict[str, Any]] = []
    for repeat, goodput in enumerate(goodputs, start=1):
        runs.append({
            "kind": "keep-alive", "multiple": 2.0, "repeat": repeat, "capacity_rps": capacity,
            "goodput_rps": goodput, "on_wire_rps": 2 * capacity, "ok": int(goodput * 8),
            "ok_within_slo": int(goodput * 8), "given_up": 0, "refused": 100,
            "refusal_p99_ms": 5.0, "window_s": 8.0, "adapter_cpu_s": 1.0 + repeat / 10,
            "mean_batch": 4.0 * repeat, "batch_limit": [8, 8 + repeat],
        })  # fmt: skip
    doc = {"meta": {"commit": commit}, "workloads": {"embed": {"bound": "model", "runs": runs}}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_each_side_is_pooled_as_shares_of_its_own_runs_capacity(
    compare: ModuleType, tmp_path: Path
) -> None:
    before = [_result(tmp_path / "a.json", "aaa", 100.0, [80.0, 90.0])]
    after = [_result(tmp_path / "b1.json", "bbb", 200.0, [190.0]),
             _result(tmp_path / "b2.json", "bbb", 100.0, [98.0, 96.0])]  # fmt: skip
    doc = tmp_path / "doc.md"
    doc.write_text(
        "before\n<!-- overload compare t: benchmarks/overload_compare.py -->\nold\n"
        "<!-- end overload compare t -->\nafter\n",
        encoding="utf-8",
    )
    out = tmp_path / "cmp.json"
    argv = ["--before", *map(str, before), "--after", *map(str, after)]
    assert compare.main([*argv, "--json", str(out), "--docs", str(doc), "--name", "t"]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    shares = row["goodput_share"]
    assert shares[0] == pytest.approx({"median": 0.85, "low": 0.8, "high": 0.9})
    assert shares[1]["median"] == pytest.approx(0.96) and shares[1]["high"] == pytest.approx(0.98)
    assert row["runs"] == [2, 3]
    assert row["batch_limit"] == ["8-10", "8-10"]
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert "| embed | keep-alive | 2 | 2 / 3 | 85 (80-90) / 96 (95-98) |" in text


def test_a_docs_file_without_the_block_is_named_and_left_alone(
    compare: ModuleType, tmp_path: Path
) -> None:
    a = _result(tmp_path / "a.json", "aaa", 100.0, [80.0])
    doc = tmp_path / "doc.md"
    doc.write_text("nothing here\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no block"):
        compare.main(["--before", str(a), "--after", str(a), "--docs", str(doc), "--name", "x"])
    assert doc.read_text() == "nothing here\n"
