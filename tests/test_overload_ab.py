"""The fixed-rate before/after overload comparison (benchmarks/overload_ab.py): its table, and
its arguments refused with a reason before anything starts."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ab(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("overload_ab")


def _run(revision: str, goodput: float, free: int) -> dict[str, Any]:
    return {
        "revision": revision, "rate": 100.0, "goodput_rps": goodput, "ok_rps": goodput,
        "refused_rps": 10.0, "adapter_cores": 0.1, "on_wire_rps": 100.0, "refusal_p99_ms": 5.0,
        "within_slo_share": 0.99, "door_refused": 100, "door_refused_with_free_slot": free,
        "door_admitted_late": 3,
    }  # fmt: skip


def test_the_table_shows_the_doors_counts_when_both_revisions_have_them(ab: ModuleType) -> None:
    runs = [_run("baseline", 60.0, 40), _run("this", 80.0, 2)]
    result = {"runs": runs, "summary": ab.summarize(runs, (100.0,)),
              "meta": {"baseline": "aaa", "commit": "bbb"}}  # fmt: skip
    table = ab.table(result)
    assert "door: refused with a slot free aaa / bbb" in table
    row = next(line for line in table.splitlines() if line.startswith("| 100 |"))
    assert "| 60 | 80 |" in row and "40 / 2" in row


def test_a_workload_other_than_digits_must_name_its_rates(
    ab: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        ab.main(["--workload", "embed", "--baseline", "HEAD"])
    assert exit_info.value.code == 2
    assert "--rates is required with --workload embed" in capsys.readouterr().err
