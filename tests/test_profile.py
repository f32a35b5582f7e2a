"""The profiler: statistics, the JSON schema and loader, the CLI, and one real HTTP run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from functions import profile, profile_report
from functions.profile_format import (
    LatencyStat,
    ProfileFormatError,
    load_profile,
    profile_from_json,
)
from functions.registry import KINDS


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    profile.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_stat_and_fit() -> None:
    s = profile.stat([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0
    assert 4.0 < s.p95 <= 100.0
    fit = profile.fit_line(
        {1: LatencyStat(3.0, 3.0), 2: LatencyStat(5.0, 5.0), 4: LatencyStat(9.0, 9.0)}
    )
    assert fit.a_ms == pytest.approx(1.0)
    assert fit.b_ms_per_item == pytest.approx(2.0)
    assert fit.predict_ms(10) == pytest.approx(21.0)


def test_arguments() -> None:
    args = _args("digits", "--batch-sizes", "1,2,4", "--threads", "2", "--no-http")
    assert args.batch_sizes == [1, 2, 4]
    assert args.threads == 2
    assert args.no_http
    assert _args("digits").batch_sizes == [1, 2, 4, 8, 16, 32, 64]
    with pytest.raises(SystemExit):
        _args("digits", "--batch-sizes", "1,x")
    with pytest.raises(SystemExit):
        _args("digits", "--threads", "0")


def test_unknown_kind_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert profile.run(_args("resnet9000", "--out", str(tmp_path))) == 2
    assert "unknown model kind 'resnet9000'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def _check_schema(doc: dict[str, object], *, http: bool) -> None:
    assert set(doc) >= {
        "kind",
        "threads",
        "machine",
        "measured_at",
        "cold_start_s",
        "batch_ms",
        "linear_fit",
    }
    loaded = profile_from_json(doc)
    assert loaded.kind == "digits"
    assert loaded.machine.cores >= 1 and loaded.machine.cpu_model
    assert loaded.batch_sizes == [1, 2]
    assert loaded.cold_start_s.load_ms > 0
    for stats in loaded.inprocess.values():
        assert 0 < stats.median <= stats.p95
    if http:
        assert loaded.cold_start_s.ready_s is not None and loaded.cold_start_s.ready_s > 0
        first = loaded.cold_start_s.first_request_ms
        assert first is not None and first > 0
        assert sorted(loaded.http) == sorted(loaded.server_compute) == [1, 2]
        for size in (1, 2):
            assert 0 < loaded.http[size].median <= loaded.http[size].p95
            assert 0 < loaded.server_compute[size].median < loaded.http[size].median


def test_profile_in_process(tmp_path: Path) -> None:
    argv = ["digits", "--out", str(tmp_path), "--batch-sizes", "1,2", "--repeats", "2"]
    assert profile.run(_args(*argv, "--no-http", "--threads", "2")) == 0
    path = tmp_path / "digits-t2.json"
    doc = json.loads(path.read_text())
    _check_schema(doc, http=False)
    assert doc["threads"] == 2
    assert doc["cold_start_s"]["ready_s"] is None
    assert load_profile(path).to_json() == doc
    table = profile_report.profile_table(load_profile(path))
    assert table.startswith("### digits, 2 threads")
    assert table.count("\n| 1 |") == table.count("\n| 2 |") == 1
    assert (
        profile_report.summary_table([load_profile(path)])
        .splitlines()[2]
        .startswith("| digits | 2 |")
    )


@pytest.mark.slow
def test_profile_with_a_real_server(tmp_path: Path) -> None:
    argv = ["digits", "--out", str(tmp_path), "--batch-sizes", "1,2", "--repeats", "2"]
    assert profile.run(_args(*argv)) == 0
    doc = json.loads((tmp_path / "digits.json").read_text())
    _check_schema(doc, http=True)


def test_load_profile_names_the_bad_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"kind": "digits", "threads": 1}))
    with pytest.raises(ProfileFormatError, match="missing key 'machine'"):
        load_profile(path)
    path.write_text("{oops")
    with pytest.raises(ProfileFormatError, match="not JSON"):
        load_profile(path)


def test_committed_profiles_load() -> None:
    paths = sorted(Path(__file__).parent.parent.joinpath("profiles").glob("*.json"))
    for path in paths:
        loaded = load_profile(path)
        assert loaded.kind in KINDS
        assert path.stem in (loaded.kind, f"{loaded.kind}-t{loaded.threads}")
        assert 1 in loaded.inprocess
        assert all(s.median > 0 for s in loaded.inprocess.values())
