"""Trace formats, windows, scaling and arrival schedules (pure, on small files in tmp_path)."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from traces import (
    BadTraceLine,
    Trace,
    TraceError,
    TraceNotFound,
    catalog,
    detect_format,
    downsample,
    exact_schedule,
    hold,
    load_arrivals,
    load_trace,
    poisson_schedule,
    ramp_trace,
    resolve_trace,
    scale_to_peak,
    spike_trace,
    step_trace,
    window,
)
from traces.catalog import ENV_VAR, SHORTCUTS, traces_dirs


def write(path: Path, text: str) -> Path:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_autoscale_file_with_floats(tmp_path: Path) -> None:
    path = write(tmp_path / "trace_t4.txt", "1.5\n3\n\n# comment\n0.25\n")
    assert detect_format(path) == "autoscale"
    trace = load_trace(path)
    assert trace.rates_rps == (1.5, 3.0, 0.25)
    assert trace.step_s == 1.0
    assert not trace.synthetic
    assert "trace_t4.txt" in trace.source


@pytest.mark.parametrize("name", ["x.rps.txt", "x.rps.txt.gz", "plain.gz", "plain.dat"])
def test_count_files_plain_or_gzipped(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, "0\n4\n7\n2\n")
    assert detect_format(path) == "counts"
    assert load_trace(path).rates_rps == (0.0, 4.0, 7.0, 2.0)


def test_count_window_is_read_from_the_middle(tmp_path: Path) -> None:
    path = write(tmp_path / "w.rps.txt.gz", "".join(f"{i}\n" for i in range(100)))
    trace = load_trace(path, start_s=10, duration_s=5)
    assert trace.rates_rps == (10.0, 11.0, 12.0, 13.0, 14.0)
    assert "seconds 10..15" in trace.source


def test_window_skips_fast_across_blocks_and_keeps_line_numbers(tmp_path: Path) -> None:
    n = 400_000  # > 1 MiB, several read blocks
    lines = [f"{i % 1000}" for i in range(n)]
    lines.insert(350_000, "# a comment in the skipped part")
    lines[n - 5] = "oops"  # line n-4 in the file (one comment line before it)
    path = write(tmp_path / "big.rps.txt", "\n".join(lines) + "\n")
    trace = load_trace(path, start_s=399_000, duration_s=3)
    assert trace.rates_rps == (0.0, 1.0, 2.0)
    with pytest.raises(BadTraceLine) as info:
        load_trace(path, start_s=n - 10)
    assert info.value.line == n - 4
    assert info.value.value == "oops"


def test_window_past_the_end_is_an_error_and_a_partial_one_is_cut(tmp_path: Path) -> None:
    path = write(tmp_path / "s.rps.txt", "1\n2\n3\n")
    with pytest.raises(TraceError, match="the file has 3"):
        load_trace(path, start_s=5)
    assert load_trace(path, start_s=1, duration_s=10).rates_rps == (2.0, 3.0)


@pytest.mark.parametrize(
    ("name", "text", "line", "value"),
    [
        ("c.rps.txt", "1\n2\n-3\n", 3, "-3"),
        ("c.rps.txt.gz", "1\n2.5\n", 2, "2.5"),
        ("trace_t5.txt", "1\n\nabc\n", 3, "abc"),
        ("trace_wc.txt", "1\nnan\n", 2, "nan"),
        ("t.csv", "time\n1.0\n2.0\nyesterday\n", 4, "yesterday"),
    ],
)
def test_bad_lines_name_file_line_and_value(
    tmp_path: Path, name: str, text: str, line: int, value: str
) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(BadTraceLine) as info:
        load_trace(path)
    assert (info.value.path, info.value.line, info.value.value) == (str(path), line, value)
    assert f"{path}:{line}" in str(info.value)
    assert repr(value) in str(info.value)


def test_timestamp_csv_in_seconds_with_header(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", "ts,user\n100.2,a\n100.9,b\n102.5,c\n100.1,d\n")
    assert detect_format(path) == "timestamps"
    assert load_trace(path).rates_rps == (3.0, 0.0, 1.0)
    arrivals = load_arrivals(path)
    assert arrivals == pytest.approx([0.0, 0.1, 0.8, 2.4])


def test_timestamp_csv_iso_without_header_and_by_column_name(tmp_path: Path) -> None:
    text = "a,2021-08-01T00:00:00Z\nb,2021-08-01T00:00:01.500+00:00\nc,2021-08-01T00:00:02\n"
    path = write(tmp_path / "iso.log", text)
    assert detect_format(path) == "timestamps"
    assert load_arrivals(path, column=1) == pytest.approx([0.0, 1.5, 2.0])
    named = write(tmp_path / "named.csv.gz", "id,when\n" + text)
    assert load_trace(named, column="when").rates_rps == (1.0, 1.0, 1.0)
    assert load_arrivals(named, column="when", start_s=1.0, duration_s=1.0) == [0.5]
    with pytest.raises(TraceError, match="no column 'missing'"):
        load_trace(named, column="missing")


def test_format_override_and_unknown_format(tmp_path: Path) -> None:
    path = write(tmp_path / "numbers.txt", "1\n2\n")
    assert load_trace(path, format="autoscale").rates_rps == (1.0, 2.0)
    with pytest.raises(TraceError, match="unknown format 'xml'"):
        load_trace(path, format="xml")
    with pytest.raises(TraceError, match="empty file"):
        load_trace(write(tmp_path / "empty.txt", "\n"))


def test_resolver_env_var_first_then_the_package_and_missing_names_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert traces_dirs({})[-1] == catalog.packaged_dir()
    assert resolve_trace("nasa", environ={}).parent == catalog.packaged_dir()
    write(tmp_path / "nasa-http-1995.rps.txt.gz", "1\n")
    assert resolve_trace("nasa", environ={ENV_VAR: str(tmp_path)}).parent == tmp_path
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(catalog, "packaged_dir", lambda: tmp_path / "nothing-here")
    with pytest.raises(TraceNotFound) as info:
        resolve_trace("twitter", environ={ENV_VAR: str(empty)})
    assert str(empty / "twitter-stream-2021-08.rps.txt.gz") in str(info.value)
    assert str(tmp_path / "nothing-here") in str(info.value)
    assert ENV_VAR in str(info.value)
    with pytest.raises(TraceNotFound, match="nasa"):
        resolve_trace(str(tmp_path / "nope.txt"))


def test_the_package_ships_every_trace_whole() -> None:
    for name in SHORTCUTS.values():
        assert (catalog.packaged_dir() / name).is_file(), name
    nasa = load_trace(resolve_trace("nasa", environ={}))
    twitter = load_trace(resolve_trace("twitter", environ={}))
    assert (len(nasa), nasa.peak_rps) == (5_059_950, 20)
    assert (len(twitter), twitter.peak_rps) == (1_899_061, 388)
    # the Azure LLM services: every request of the source CSVs (traces/data/README.md)
    code = load_trace(resolve_trace("azure-llm-code", environ={}))
    conv = load_trace(resolve_trace("azure-llm-conv", environ={}))
    assert (len(code), sum(code.rates_rps), code.peak_rps) == (3_436, 8_819, 67)
    assert (len(conv), sum(conv.rates_rps), conv.peak_rps) == (3_502, 19_366, 16)


def _shared(name: str) -> Path:
    return resolve_trace(name, environ={})


def test_window_of_the_real_nasa_trace() -> None:
    trace = load_trace(_shared("nasa"), start_s=5_000_000, duration_s=3600)
    assert len(trace) == 3600
    assert sum(trace.rates_rps) == 4629  # zcat | sed -n 5000001,5003600p | sum
    assert trace.peak_rps <= 20


def test_window_of_the_real_twitter_trace() -> None:
    trace = load_trace(_shared("twitter"), start_s=100_000, duration_s=600)
    assert len(trace) == 600
    assert 0 < trace.mean_rps < trace.peak_rps <= 388


def test_scaling_sets_the_peak_and_keeps_proportions() -> None:
    trace = Trace((1.0, 4.0, 2.0, 0.0), source="t")
    scaled = scale_to_peak(trace, 100.0)
    assert scaled.peak_rps == 100.0
    assert scaled.rates_rps == (25.0, 100.0, 50.0, 0.0)
    assert "scaled to peak 100" in scaled.source
    with pytest.raises(TraceError, match="every step is 0"):
        scale_to_peak(Trace((0.0, 0.0)), 10.0)


def test_hold_window_and_downsample() -> None:
    trace = Trace(tuple(float(i) for i in range(10)), source="t")
    held = hold(trace, 30.0)
    assert held.step_s == 30.0 and held.duration_s == 300.0 and held.rates_rps == trace.rates_rps
    assert held.rate_at(59.9) == 1.0 and held.rate_at(300.0) is None
    assert window(trace, 2, 3).rates_rps == (2.0, 3.0, 4.0)
    coarse = downsample(trace, 4)
    assert coarse.rates_rps == (1.5, 5.5, 8.5) and coarse.step_s == 4.0
    with pytest.raises(TraceError):
        window(trace, 20)
    with pytest.raises(TraceError):
        hold(trace, 0.0)


def test_poisson_schedule_is_seeded_sorted_and_within_steps() -> None:
    trace = Trace((50.0, 0.0, 200.0), step_s=2.0)
    a = poisson_schedule(trace, seed=7)
    assert a == poisson_schedule(trace, seed=7)
    assert a != poisson_schedule(trace, seed=8)
    assert a == sorted(a)
    per_step = [sum(1 for t in a if i * 2.0 <= t < (i + 1) * 2.0) for i in range(3)]
    assert len(a) == sum(per_step)
    assert per_step[1] == 0
    for count, expected in zip(per_step, (100.0, 0.0, 400.0), strict=True):
        assert abs(count - expected) <= 5 * math.sqrt(expected) + 1e-9
    assert all(t < 3.0 for t in poisson_schedule(trace, seed=7, until_s=3.0))


def test_poisson_schedule_count_matches_rate_times_duration() -> None:
    trace = hold(Trace((100.0,) * 60), 1.0)
    counts = [len(poisson_schedule(trace, seed=s)) for s in range(5)]
    for count in counts:
        assert abs(count - 6000) < 5 * math.sqrt(6000)


def test_exact_schedule_keeps_recorded_times() -> None:
    assert exact_schedule([0.5, 0.1, 2.0], until_s=1.0) == [0.1, 0.5]
    assert exact_schedule([1.0, 2.0], speedup=2.0) == [0.5, 1.0]


def test_synthetic_traces_are_labelled() -> None:
    traces = [
        step_trace([1.0, 5.0], step_s=10.0),
        ramp_trace(0.0, 10.0, duration_s=11.0),
        spike_trace(2.0, 20.0, duration_s=10.0, spike_at_s=4.0, spike_s=2.0),
    ]
    assert all(t.synthetic and "synthetic" in t.source for t in traces)
    assert traces[1].rates_rps[0] == 0.0 and traces[1].rates_rps[-1] == 10.0
    assert traces[2].rates_rps == (2.0,) * 4 + (20.0,) * 2 + (2.0,) * 4


def test_trace_rejects_bad_rates() -> None:
    with pytest.raises(TraceError, match="step 1"):
        Trace((1.0, -2.0))
    with pytest.raises(TraceError, match="step_s"):
        Trace((1.0,), step_s=0.0)
