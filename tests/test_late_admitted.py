"""benchmarks/late_admitted.py: batches rebuilt from request records, their overlap, and each
late member put in the kind that made it late (waited, slow beside another batch, slow alone)."""

from __future__ import annotations

import gzip
import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def late(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("late_admitted")


def _batch(sent: float, done: float, members: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """Records of one batch of one-instance members, each (arrival, deadline)."""
    common = {"function": "f", "status": 200, "dispatch": sent, "done": done, "cold": False}
    return [{**common, "arrival": a, "deadline": d, "batch_size": len(members)} for a, d in members]


def _alone(start: float) -> list[dict[str, Any]]:
    """Four alone batches of one at 50 ms each, one a second from ``start``: the line."""
    out: list[dict[str, Any]] = []
    for k in range(4):
        t = start + k
        out += _batch(t, t + 0.05, [(t, t + 0.3)])
    return out


def test_overlap_is_the_union_of_the_others_within_the_batch(late: ModuleType) -> None:
    records = (
        _batch(0.0, 0.10, [(0.0, 1.0)])
        + _batch(0.02, 0.06, [(0.0, 1.0)])  # inside the first
        + _batch(0.04, 0.08, [(0.0, 1.0)])  # overlaps the second: union 0.02-0.08
    )
    first = late.batches(records)[0]
    assert first.sent == 0.0
    assert first.beside == pytest.approx(0.6)


def test_late_members_are_put_in_their_kind(late: ModuleType) -> None:
    records = _alone(10.0)
    # left 0.29 s into a 0.3 s budget: even the 50 ms line misses, so it waited
    records += _batch(20.29, 20.34, [(20.0, 20.3)])
    # left in time (0.1 s of 0.3 used) but its batch took 0.25 s beside another: slow beside
    records += _batch(30.1, 30.35, [(30.0, 30.3)])
    records += _batch(30.12, 30.30, [(30.1, 31.0)])  # the other one, in time
    # left in time, alone, and took 0.25 s: slow alone
    records += _batch(40.1, 40.35, [(40.0, 40.3)])
    (row,) = late.report_records(records)
    assert row["late"] == 3
    assert row["late_by_kind"] == {"waited": 1, "slow beside": 1, "slow alone": 1, "cold": 0}
    assert row["alone_line_ms"][0] + row["alone_line_ms"][1] == pytest.approx(50.0)
    assert row["beside_ratio_median"] == pytest.approx((0.25 / 0.05 + 0.18 / 0.05) / 2, rel=1e-3)


def test_refusals_and_cold_batches_do_not_make_the_line(late: ModuleType) -> None:
    records = _alone(10.0)
    records += [dict(r, cold=True, dispatch=50.0, done=52.0) for r in _batch(50, 52, [(50, 50.3)])]
    records.append({"function": "f", "status": 503, "arrival": 60.0, "dispatch": None,
                    "done": 60.0, "deadline": 60.3, "batch_size": 0})  # fmt: skip
    (row,) = late.report_records(records)
    assert row["answered"] == 5
    assert (row["failed"], row["failed_by_status"]) == (1, {"503": 1})  # given up, not a batch
    assert row["alone_line_ms"][0] + row["alone_line_ms"][1] == pytest.approx(50.0)
    assert row["late_by_kind"]["cold"] == 1  # the cold one is late, and no sample of the line


def test_a_request_given_up_while_a_pair_ran_is_counted_so(
    late: ModuleType, tmp_path: Path
) -> None:
    records = _alone(0.0)
    records += _batch(10.0, 10.2, [(10.0, 11.0)]) + _batch(10.05, 10.25, [(10.0, 11.0)])
    gave_up = {"function": "f", "status": 503, "dispatch": None, "batch_size": 0}
    records.append({**gave_up, "arrival": 10.1, "done": 10.4, "deadline": 10.4})
    records.append({**gave_up, "arrival": 20.0, "done": 20.3, "deadline": 20.3})
    path = tmp_path / "r.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(r) + "\n" for r in records)
    (row,) = late.report([path])
    assert (row["failed"], row["failed_while_beside"]) == (2, 1)


def test_a_bad_line_is_named(late: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_alone(0.0)[0]) + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"r\.jsonl:2: not a record"):
        late.read(path)


def test_stretches_are_cut_at_pauses(late: ModuleType, tmp_path: Path) -> None:
    records = _alone(0.0) + _alone(20.0)  # arrivals 0..3 and 20..23
    parts = late.stretches(records, 5.0)
    assert [len(p) for p in parts] == [4, 4]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    rows = late.report([path], 5.0)
    assert [r["file"] for r in rows] == [
        "r.jsonl @0 s, 1 req/s admitted",
        "r.jsonl @20 s, 1 req/s admitted",
    ]
    (last,) = late.report([path], 5.0, last=1)
    assert last == rows[1]
    assert late.totals(rows).startswith("total: 8 answered, 0 late")


def test_a_config_that_keeps_records_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What overload.py and overload_ab.py --records serve: the workload's config, records on."""
    from slackwise_config import load_config

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    setup = importlib.import_module("overload_setup")
    config = setup.config_with_records(ROOT, setup.WORKLOADS["embed"], tmp_path / "e.jsonl")
    loaded = load_config(str(config))
    assert loaded.adapter.records == str((tmp_path / "e.jsonl").resolve())
    assert set(loaded.functions) == {"embed"}
